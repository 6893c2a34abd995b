"""The documented "summarise failed jobs too" pattern with a job that really fails: a DAG under ``dag.test()``
runs a training task whose entry point raises on the offline endpoint (waiting synchronously or deferred),
then summary tasks with ``trigger_rule="all_done"``. The failed task pushed no ``return_value``, so the old
pattern (``xcom_pull(task_ids='train')['training_job_name']``) fails; ``training_task_id=`` and the
``training_job_name`` XCom key both find the job, and the summary and its page show why it failed."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dag_files import dag_file
from support.example_jobs import Group, example_job

from airflow_hetero.local import LocalEndpoint, RunOptions
from airflow_hetero.logs.per_group import clean_text
from airflow_hetero.plugins.page import render_page

pytestmark = pytest.mark.slow

BUCKET = "failed-job-summary"
SCRIPT = """\
print("reading the week's rows", flush=True)
rows = []
if not rows:
    raise ValueError("no rows in the raw channel")
"""
JOB = example_job(
    "fails",
    framework_version="2.0",
    entry_point="fail.py",
    source_dir="failing_code",
    output_path=f"s3://{BUCKET}/models",
    groups=[Group("data_group", "ml.c5.xlarge"), Group("train_group", "ml.g5.xlarge")],
    max_run=600,
)
DAG_FILE = textwrap.dedent(
    f'''
    """A training task whose job fails, and its summaries (run whatever the training task's ending)."""
    import pendulum

    from airflow.providers.common.compat.sdk import DAG
    from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator

    JOB = {JOB!r}

    for deferrable in (False, True):
        with DAG(
            "hetero_failed_" + ("deferred" if deferrable else "sync"),
            schedule=None,
            start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
            default_args={{"retries": 0}},
        ) as dag:
            train = HeteroTrainingOperator(task_id="train", job=JOB, deferrable=deferrable, check_interval=0.5)
            summaries = [
                HeteroLogSummaryOperator(task_id="summarize", training_task_id="train", trigger_rule="all_done"),
                HeteroLogSummaryOperator(
                    task_id="summarize_by_key",
                    job_name="{{{{ ti.xcom_pull(task_ids='train', key='training_job_name') }}}}",
                    trigger_rule="all_done",
                ),
                HeteroLogSummaryOperator(  # the pattern the docs showed before: return_value is not there
                    task_id="summarize_by_return_value",
                    job_name="{{{{ ti.xcom_pull(task_ids='train')['training_job_name'] }}}}",
                    trigger_rule="all_done",
                ),
            ]
            train >> summaries
        globals()[dag.dag_id] = dag
    '''
)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    with LocalEndpoint(workdir=tmp_path_factory.mktemp("endpoint"), run=RunOptions(metrics_interval=0.3)) as ep:
        ep.client("s3").create_bucket(Bucket=BUCKET)
        yield ep


@pytest.fixture
def dag_module(airflow_db: None, endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from airflow.configuration import conf

    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", endpoint.airflow_connection_json())
    folder = Path(conf.get("core", "dags_folder"))
    (folder / "failing_code").mkdir(parents=True, exist_ok=True)
    (folder / "failing_code" / "fail.py").write_text(SCRIPT)
    with dag_file("hetero_failed_dag", DAG_FILE) as module:
        yield module


@pytest.mark.parametrize("dag_id", ["hetero_failed_sync", "hetero_failed_deferred"])
def test_the_summary_of_a_failed_job(dag_id: str, dag_module: Any, endpoint: LocalEndpoint) -> None:
    dag_run = getattr(dag_module, dag_id).test()
    tis = {ti.task_id: ti for ti in dag_run.get_task_instances()}
    states = {task: str(ti.state) for task, ti in tis.items()}
    assert states == {
        "train": "failed",
        "summarize": "success",
        "summarize_by_key": "success",
        "summarize_by_return_value": "failed",  # UndefinedError: 'None' has no attribute 'training_job_name'
    }
    train = tis["train"]
    assert train.xcom_pull(task_ids="train") is None  # a failed task pushes no return_value
    name = train.xcom_pull(task_ids="train", key="training_job_name")
    described = endpoint.client("sagemaker").describe_training_job(TrainingJobName=name)
    assert described["TrainingJobStatus"] == "Failed"
    for task in ("summarize", "summarize_by_key"):
        summary = tis[task].xcom_pull(task_ids=task)
        assert summary["training_job_name"] == name and summary["status"] == "Failed"
        assert summary["failure_reason"] == clean_text(described["FailureReason"])  # control characters out
        samples = [s for g in summary["groups"].values() for s in g["error_samples"]]
        assert any(s.get("exception") == "ValueError: no rows in the raw channel" for s in samples), samples
    page = render_page(summary, where="w")
    assert "Failure reason" in page and "ValueError: no rows in the raw channel" in page
