"""The system test's DAGs (tests/system), deployed into a production-shaped Airflow's dags folder.

``system_deferred``: a deferrable training task (the wait runs in the triggerer), then the log
summary. ``system_sync``: a training task that waits in its worker, with one retry. Each run's
job lasts ``dag_run.conf["seconds"]``. The connection ``aws_system`` points at the offline endpoint.
Their training group is an ml.g4dn.xlarge: ml.g5.xlarge is ``system_retraining``'s (the example job's
type), which the endpoint starts without capacity for.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG

from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator

CONN = "aws_system"
BUCKET = "hetero-system"
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def job(base_job_name: str) -> dict[str, Any]:
    """Two instance groups of one host each; the code is this folder's ``system_code``."""
    return {
        "role": "arn:aws:iam::123456789012:role/SageMakerRole",
        "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/hetero-train:latest",
        "entry_point": "train.py",
        "source_dir": "system_code",
        "output_path": f"s3://{BUCKET}/output",
        "base_job_name": base_job_name,
        "instance_groups": [
            {"instance_group_name": "data_group", "instance_type": "ml.c5.xlarge", "instance_count": 1},
            {"instance_group_name": "train_group", "instance_type": "ml.g4dn.xlarge", "instance_count": 1},
        ],
        "inputs": {"train": {"s3_data": f"s3://{BUCKET}/train/", "instance_groups": ["data_group"]}},
        "hyperparameters": {
            "seconds": "{{ dag_run.conf.get('seconds', 10) }}",
            "release_file": "{{ dag_run.conf.get('release_file', '') }}",
        },
        "metric_definitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
        "max_run": 1800,
    }


with DAG("system_deferred", schedule=None, start_date=START, max_active_runs=16, is_paused_upon_creation=False):
    train = HeteroTrainingOperator(
        task_id="train", job=job("sys-deferred"), aws_conn_id=CONN, deferrable=True, check_interval=2
    )
    summarize = HeteroLogSummaryOperator(
        task_id="summarize",
        job_name="{{ ti.xcom_pull(task_ids='train')['training_job_name'] }}",
        aws_conn_id=CONN,
    )
    train >> summarize

with DAG("system_sync", schedule=None, start_date=START, max_active_runs=16, is_paused_upon_creation=False):
    HeteroTrainingOperator(
        task_id="train",
        job=job("sys-sync"),
        aws_conn_id=CONN,
        deferrable=False,
        check_interval=2,
        retries=1,
        retry_delay=timedelta(seconds=1),
    )
