"""The example DAG that submits through an AWS Batch job queue, under ``dag.test()`` against the offline
endpoint's queue: the deferred train task waits in the queue, follows the attempt, and the summary reads it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dag_files import dag_file

import airflow_hetero.example_dags as example_dags
from airflow_hetero.local import BatchOptions, LocalEndpoint, RunOptions

pytestmark = pytest.mark.slow

EXAMPLES = Path(example_dags.__file__).parent


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[LocalEndpoint]:
    with LocalEndpoint(
        workdir=tmp_path / "endpoint",
        run=RunOptions(metrics_interval=0.3),
        batch=BatchOptions(poll_interval=0.05),
        batch_queues={"nightly-queue": 2},
    ) as ep:
        ep.client("s3").create_bucket(Bucket="queued-demo")
        yield ep


@pytest.fixture
def dag_module(airflow_db: None, endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from airflow.configuration import conf

    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", endpoint.airflow_connection_json())
    monkeypatch.setenv("HETERO_BATCH_QUEUE", "nightly-queue")
    monkeypatch.setenv("HETERO_QUEUED_POLL_SECONDS", "0.5")
    monkeypatch.setenv("HETERO_QUEUED_BUCKET", "queued-demo")
    folder = Path(conf.get("core", "dags_folder"))
    shutil.copytree(EXAMPLES / "hetero_queued_training", folder / "hetero_queued_training", dirs_exist_ok=True)
    with dag_file("hetero_queued_training_dag", (EXAMPLES / "hetero_queued_training_dag.py").read_text()) as module:
        yield module


def test_the_queued_example_dag_runs_through_the_queue(dag_module: Any, endpoint: LocalEndpoint) -> None:
    dag_run = dag_module.dag.test()
    states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
    assert states == {"train": "success", "summarize": "success"}
    (train,) = [ti for ti in dag_run.get_task_instances() if ti.task_id == "train"]
    result = train.xcom_pull(task_ids="train")
    service = result["service_job"]
    assert service["status"] == "SUCCEEDED" and service["job_queue"].endswith("job-queue/nightly-queue")
    assert result["training_job_name"].startswith("AWSBatchnightly-")
    batch = endpoint.client("batch")
    named = batch.list_service_jobs(filters=[{"name": "JOB_NAME", "values": [service["job_name"]]}])
    assert len(named["jobSummaryList"]) == 1
    summary = train.xcom_pull(task_ids="summarize")
    assert summary["training_job_name"] == result["training_job_name"]
    assert set(summary["groups"]) == {"data_group", "train_group"}
