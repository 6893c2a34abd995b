"""Nightly training through an AWS Batch job queue: the queue decides when the heterogeneous job runs.

train (one service job in the queue ``HETERO_BATCH_QUEUE``, default ``gpu-queue``: it waits there while other
teams' jobs hold the queue's instances, Batch requeues it when SageMaker has no capacity and retries it once
unless the script failed; the task logs its place in the queue and then each attempt's training job) ->
summarize (the latest attempt's per-group logs and cost). docs/queue.md says how to create the queue on AWS;
``airflow-hetero local serve --batch-queue gpu-queue=4`` makes one offline. Runs on Airflow 2.11 and 3.x.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.providers.common.compat.sdk import DAG

from airflow_hetero.operators import BatchQueue, HeteroLogSummaryOperator, HeteroTrainingOperator

#: The job queue (name or ARN) and how often to look at the job.
QUEUE = os.environ.get("HETERO_BATCH_QUEUE", "gpu-queue")
POLL_SECONDS = float(os.environ.get("HETERO_QUEUED_POLL_SECONDS", "60"))
BUCKET = os.environ.get("HETERO_QUEUED_BUCKET", "airflow-hetero-demo")

JOB = {
    "role": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "framework": "pytorch",
    "framework_version": "2.0",
    "py_version": "py310",
    "entry_point": "train.py",
    "source_dir": "hetero_queued_training/code",
    "output_path": f"s3://{BUCKET}/queued-models",
    "base_job_name": "nightly",  # at most 11 characters in a queue: Batch names attempts AWSBatch<name><32 hex>
    "instance_groups": [
        {"instance_group_name": "data_group", "instance_type": "ml.c5.xlarge", "instance_count": 1},
        {"instance_group_name": "train_group", "instance_type": "ml.g5.xlarge", "instance_count": 1},
    ],
    "max_run": 3600,
}

with DAG(
    dag_id="hetero_queued_training",
    description="Nightly training through an AWS Batch job queue (SageMaker Training service jobs)",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 5, tz="UTC"),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
    tags=["sagemaker", "heterogeneous-cluster", "aws-batch", "example"],
) as dag:
    train = HeteroTrainingOperator(
        task_id="train",
        job=JOB,
        batch_queue=BatchQueue(
            QUEUE,
            retry_strategy={
                "attempts": 2,
                "evaluateOnExit": [{"action": "EXIT", "onStatusReason": "*AlgorithmError*"}],
            },
            attempt_timeout=2 * 3600,
        ),
        deferrable=True,
        check_interval=POLL_SECONDS,
    )
    summarize = HeteroLogSummaryOperator(task_id="summarize", training_task_id="train")
    train >> summarize
