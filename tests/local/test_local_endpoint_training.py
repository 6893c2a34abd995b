"""Operator, trigger and on_kill against the offline endpoint: real jobs, real processes, real logs."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
from support.example_jobs import example_job
from support.local_jobkit import BUCKET
from support.task_logs import record_logs

from airflow_hetero._compat import AIRFLOW_V_3
from airflow_hetero.job.outcome import TrainingJobFailedError, TrainingJobStoppedError
from airflow_hetero.local import LocalEndpoint
from airflow_hetero.operators import HeteroTrainingOperator
from airflow_hetero.triggers import HeteroTrainingTrigger

pytestmark = pytest.mark.slow

ENDPOINT_RUN = {"stop_grace": 1.0, "metrics_interval": 0.5}
CONN_ID = "hetero_local_endpoint"
SCRIPT = """\
import os, sys, time
host, group = os.environ["SM_CURRENT_HOST"], os.environ["SM_CURRENT_INSTANCE_GROUP"]
print(f"hello from {host} in {group}", flush=True)
mode = os.environ.get("SM_HP_MODE", "ok").strip('"')
if mode == "fail" and group == "dnn_group":
    raise SystemExit("loss became NaN at step 3")
if mode == "sleep":
    time.sleep(60)
print(f"{host} done", flush=True)
"""


@pytest.fixture
def conn(endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> LocalEndpoint:
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", endpoint.airflow_connection_json())
    return endpoint


@pytest.fixture(scope="module")
def code_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("code")
    (path / "train.py").write_text(SCRIPT)
    return path


def operator(code_dir: Path, mode: str, **kwargs: Any) -> HeteroTrainingOperator:
    job = example_job(
        f"local-{mode}",
        framework_version="2.1",
        source_dir=str(code_dir),
        output_path=f"s3://{BUCKET}/output",
        hyperparameters={"mode": mode},
        max_run=120,
    )
    kwargs.setdefault("deferrable", False)
    return HeteroTrainingOperator(task_id="train", job=job, aws_conn_id=CONN_ID, check_interval=0.3, **kwargs)


def context(run_id: str) -> dict[str, Any]:
    return {"ti": MagicMock(dag_id="local", task_id="train", run_id=run_id, map_index=-1)}


def test_sync_wait_streams_every_host_with_its_group(conn: LocalEndpoint, code_dir: Path) -> None:
    op = operator(code_dir, "ok", print_log=True)
    logged = record_logs(op)
    result = op.execute(context("ok-1"))
    assert result["status"] == "Completed"
    assert result["model_artifacts"].endswith("/output/model.tar.gz")
    hosts = {"algo-1", "algo-2", "algo-3"}
    lines = logged.lines
    hello = sorted(line for line in lines if " hello from " in line)
    assert len(hello) == 3  # each line exactly once
    groups = {h: line.split("]")[0].strip("[").split("/")[0] for line in hello for h in hosts if f"/{h}]" in line}
    assert set(groups) == hosts
    for line in hello:  # the prefix agrees with what the host itself says about its group
        prefix, _, text = line.partition("] ")
        group, host = prefix.strip("[").split("/")
        assert text == f"hello from {host} in {group}"
    assert sorted(groups.values()).count("data_group") == 2


def test_failed_job_reports_the_endpoint_failure_reason(conn: LocalEndpoint, code_dir: Path) -> None:
    with pytest.raises(TrainingJobFailedError) as info:
        operator(code_dir, "fail").execute(context("fail-1"))
    assert info.value.failure_reason
    assert "NaN" in str(info.value) or "exit" in str(info.value).lower()


def test_on_kill_stops_a_real_running_job(conn: LocalEndpoint, code_dir: Path) -> None:
    op = operator(code_dir, "sleep")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            if not AIRFLOW_V_3:  # 2.11's ExecutorSafeguard keeps its call stack in a main-thread local
                from airflow.models.baseoperator import ExecutorSafeguard

                ExecutorSafeguard._sentinel.callers = {}
            op.execute(context("kill-1"))
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    sm = conn.client("sagemaker")
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the job never reached Training"
        name = op.run.active_job_name if op.run is not None else None
        found = sm.list_training_jobs(NameContains=name)["TrainingJobSummaries"] if name else []
        if found and sm.describe_training_job(TrainingJobName=name)["SecondaryStatus"] == "Training":
            break
        time.sleep(0.1)
    op.on_kill()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], TrainingJobStoppedError)
    assert sm.describe_training_job(TrainingJobName=errors[0].job_name)["TrainingJobStatus"] == "Stopped"


async def test_trigger_waits_for_a_real_job_and_on_kill_stops_another(conn: LocalEndpoint, code_dir: Path) -> None:
    ok = operator(code_dir, "ok", wait_for_completion=False).execute(context("trigger-ok"))
    trigger = HeteroTrainingTrigger(ok["training_job_name"], aws_conn_id=CONN_ID, poll_interval=0.2)
    event = await asyncio.wait_for(anext(trigger.run()), 60)
    assert (event.payload["status"], event.payload["job_status"]) == ("done", "Completed")

    sleeping = operator(code_dir, "sleep", wait_for_completion=False).execute(context("trigger-kill"))
    name = sleeping["training_job_name"]
    owner = HeteroTrainingTrigger(name, aws_conn_id=CONN_ID, poll_interval=0.2, stop_on_kill=True)
    await owner.on_kill()
    event = await asyncio.wait_for(anext(owner.run()), 60)
    assert (event.payload["status"], event.payload["job_status"]) == ("done", "Stopped")
