"""A whole DAG under ``dag.test()``: operator(wait_for_completion=False) >> sensors (poke and deferred).

Tasks and the deferred sensor's trigger run in this process and reach a moto server over HTTP
through an Airflow connection, so the sync (boto3) and async (aiobotocore) clients are both real.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from support.dag_files import dag_file
from support.example_jobs import example_job
from support.moto_jobs import ROLE, MotoJobs, aws_connection_env, moto_server

from airflow_hetero.hooks.training import HeteroTrainingHook

pytestmark = pytest.mark.slow

JOB = example_job(
    "hetero-e2e",
    role=ROLE,
    output_path="s3://bucket/output/{{ run_id | replace(':', '-') }}",
    inputs={"train": {"s3_data": "s3://bucket/train", "instance_groups": ["data_group"]}},
)
DAG_FILE = textwrap.dedent(
    f'''
    """End-to-end test DAGs: submit without waiting, then wait with a poking or a deferred sensor."""
    import pendulum

    from airflow.providers.common.compat.sdk import DAG
    from airflow_hetero.operators import HeteroTrainingOperator
    from airflow_hetero.sensors import HeteroTrainingSensor

    JOB = {JOB!r}
    JOB_NAME = "{{{{ ti.xcom_pull(task_ids='submit')['training_job_name'] }}}}"

    for deferrable in (False, True):
        with DAG(
            "hetero_e2e_deferred" if deferrable else "hetero_e2e_poke",
            schedule=None,
            start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        ) as dag:
            submit = HeteroTrainingOperator(
                task_id="submit", job=JOB, aws_conn_id="moto_e2e", wait_for_completion=False, print_log=False
            )
            wait = HeteroTrainingSensor(
                task_id="wait", job_name=JOB_NAME, aws_conn_id="moto_e2e", poke_interval=0.05, deferrable=deferrable
            )
            submit >> wait
        globals()[dag.dag_id] = dag
    '''
)


@pytest.fixture
def dag_module(airflow_db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with dag_file("hetero_e2e_dag", DAG_FILE) as module:
        yield module


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    from airflow_hetero._retry import RetryPolicy

    monkeypatch.setattr(HeteroTrainingHook, "default_retry_policy", RetryPolicy(3, 0.01, 0.02))
    # no botocore-level retries (the hooks' and the watcher's own are the ones that count): MotoJobs' jobs have no
    # end time, so moto's ListTrainingJobs answers 500 and the trigger's watcher describes instead (its fallback),
    # after botocore's backoff (~12 s of the deferred run) when botocore retries
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with moto_server() as url:
        name, value = aws_connection_env("moto_e2e", url)
        monkeypatch.setenv(name, value)
        jobs = MotoJobs()
        jobs.install(monkeypatch)
        yield jobs


@pytest.mark.parametrize("dag_id", ["hetero_e2e_poke", "hetero_e2e_deferred"])
def test_operator_then_sensor_under_dag_test(
    dag_id: str, dag_module: Any, jobs: MotoJobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_hetero.triggers import HeteroTrainingTrigger

    events: list[dict[str, Any]] = []
    original_run = HeteroTrainingTrigger.run

    async def recording_run(self: HeteroTrainingTrigger) -> Any:
        async for event in original_run(self):
            events.append(dict(event.payload))
            yield event

    monkeypatch.setattr(HeteroTrainingTrigger, "run", recording_run)
    jobs.every_job = [
        {"status": "InProgress", "secondary": "Downloading", "message": "Downloading input data"},
        {"status": "InProgress", "secondary": "Training", "message": "Training image download completed."},
        {"status": "InProgress", "secondary": "Training"},
        {"status": "Completed", "secondary": "Completed", "BillableTimeInSeconds": 360},
    ]
    dag_run = getattr(dag_module, dag_id).test()
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states == {"submit": "success", "wait": "success"}
    assert str(dag_run.state) == "success"
    assert jobs.calls["CreateTrainingJob"] == 1
    (name,) = jobs.names()
    assert name.startswith("hetero-e2e-")
    assert jobs.job(name).output_data_config["S3OutputPath"].startswith("s3://bucket/output/manual__")
    # submit's describe + one per poke/poll until Completed + (deferred) the describe in execute_complete
    assert jobs.calls["DescribeTrainingJob"] >= len(jobs.every_job) + 1
    if dag_id.endswith("deferred"):
        assert [(e["status"], e["job_name"], e["job_status"]) for e in events] == [("done", name, "Completed")]
    else:
        assert events == []
    results = {ti.task_id: ti.xcom_pull(task_ids=ti.task_id) for ti in dag_run.get_task_instances()}
    assert results["submit"]["status"] == "InProgress"
    assert results["wait"]["training_job_name"] == name
    assert results["wait"]["status"] == "Completed"
    assert results["wait"]["billable_seconds"] == 360
