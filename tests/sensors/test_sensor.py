"""HeteroTrainingSensor: poke and reschedule modes without state, deferral, outcomes, logs."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
from support.moto_jobs import FAST, MotoJobs, hetero_request, mocked_jobs, put_logs, throttling, toolkit_startup
from support.task_logs import record_logs

from airflow_hetero._compat import AirflowException, TaskDeferred
from airflow_hetero.job.outcome import (
    TrainingJobFailedError,
    TrainingJobStoppedError,
    TrainingJobTimeoutError,
    result_dict,
)
from airflow_hetero.sensors import HeteroTrainingSensor
from airflow_hetero.triggers import HeteroTrainingTrigger


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    with mocked_jobs(monkeypatch) as jobs:
        yield jobs


def submit(name: str) -> None:
    boto3.client("sagemaker", region_name="us-east-1").create_training_job(**hetero_request(name))


def sensor(name: str, **kwargs: Any) -> HeteroTrainingSensor:
    kwargs.setdefault("deferrable", False)
    return HeteroTrainingSensor(task_id="wait", job_name=name, aws_conn_id=None, poke_interval=0.01, **kwargs)


def context() -> dict[str, Any]:
    return {"ti": MagicMock()}


def state_of(obj: Any) -> dict[str, Any]:
    # The lazily created logger is the only attribute a poke may add.
    return copy.deepcopy({k: v for k, v in vars(obj).items() if k not in ("_cached_logger", "_log")})


def test_poke_until_completed_returns_the_operator_dict(jobs: MotoJobs) -> None:
    submit("sense-ok")
    s = sensor("sense-ok")
    assert s.poke(context()).is_done is False
    jobs.set("sense-ok", "InProgress", "Training", "Training image download completed.")
    assert s.poke(context()).is_done is False
    jobs.set("sense-ok", "Completed", "Completed", BillableTimeInSeconds=120, TrainingTimeInSeconds=100)
    done = s.poke(context())
    assert done.is_done is True
    expected = result_dict(
        boto3.client("sagemaker", region_name="us-east-1").describe_training_job(TrainingJobName="sense-ok")
    )
    assert done.xcom_value == expected
    assert done.xcom_value["status"] == "Completed"
    assert done.xcom_value["billable_seconds"] == 120
    assert done.xcom_value["instance_groups"] == [
        {"name": "data_group", "type": "ml.c5.xlarge", "count": 2},
        {"name": "dnn_group", "type": "ml.p3.2xlarge", "count": 1},
    ]


def test_reschedule_mode_works_across_fresh_instances_without_state(jobs: MotoJobs) -> None:
    submit("sense-resched")
    steps = [("InProgress", "Downloading"), ("InProgress", "Training"), ("Completed", "Completed")]
    results = []
    for status, secondary in steps:
        jobs.set("sense-resched", status, secondary)
        fresh = sensor("sense-resched", mode="reschedule")
        before = state_of(fresh)
        results.append(fresh.poke(context()))
        assert state_of(fresh) == before  # nothing about the job was kept on self
    assert [r.is_done for r in results] == [False, False, True]
    assert results[-1].xcom_value["training_job_name"] == "sense-resched"


def test_execute_in_poke_mode_returns_the_dict(jobs: MotoJobs) -> None:
    submit("sense-exec")
    jobs.script("sense-exec", {"status": "InProgress", "secondary": "Training"}, {"status": "Completed"})
    assert sensor("sense-exec").execute(context())["status"] == "Completed"


def test_failed_job_fails_with_its_reason(jobs: MotoJobs) -> None:
    submit("sense-failed")
    jobs.set(
        "sense-failed",
        "Failed",
        "Failed",
        failure_reason="ClientError: ResourceLimitExceeded for ml.p3.2xlarge",
    )
    with pytest.raises(TrainingJobFailedError, match=r"ResourceLimitExceeded for ml\.p3\.2xlarge") as info:
        sensor("sense-failed").poke(context())
    assert info.value.job_name == "sense-failed"


def test_stopped_fails_by_default(jobs: MotoJobs) -> None:
    submit("sense-stopped")
    jobs.set("sense-stopped", "Stopped", "Stopped")
    with pytest.raises(TrainingJobStoppedError, match="fail_on_stopped=False"):
        sensor("sense-stopped").poke(context())


def test_stopped_succeeds_when_allowed(jobs: MotoJobs) -> None:
    submit("sense-stopped-ok")
    jobs.set("sense-stopped-ok", "Stopped", "Stopped")
    done = sensor("sense-stopped-ok", fail_on_stopped=False).poke(context())
    assert done.is_done and done.xcom_value["status"] == "Stopped"


def test_throttling_burst_is_not_fatal(jobs: MotoJobs) -> None:
    submit("sense-throttle")
    jobs.script("sense-throttle", *[throttling() for _ in range(FAST.max_attempts)], {"status": "Completed"})
    s = sensor("sense-throttle")
    assert s.poke(context()).is_done is False  # the whole retry budget was throttled
    assert s.poke(context()).is_done is True


def test_missing_job_fails(jobs: MotoJobs) -> None:
    with pytest.raises(Exception, match="Could not find training job"):
        sensor("sense-missing").poke(context())


def test_deferrable_defers_to_the_trigger(jobs: MotoJobs) -> None:
    submit("sense-defer")
    s = sensor("sense-defer", deferrable=True, timeout=600)
    with pytest.raises(TaskDeferred) as info:
        s.execute(context())
    trigger = info.value.trigger
    assert isinstance(trigger, HeteroTrainingTrigger)
    assert trigger.job_name == "sense-defer"
    assert trigger.stop_on_kill is False  # the sensor does not own the job
    assert trigger.deadline == pytest.approx(time.time() + 600, abs=30)
    assert info.value.method_name == "execute_complete"


def test_deferrable_does_not_defer_for_a_finished_job(jobs: MotoJobs) -> None:
    submit("sense-defer-done")
    jobs.set("sense-defer-done", "Completed", "Completed")
    assert sensor("sense-defer-done", deferrable=True).execute(context())["status"] == "Completed"


def test_execute_complete_matches_poke(jobs: MotoJobs) -> None:
    submit("sense-complete")
    jobs.set("sense-complete", "Completed", "Completed")
    s = sensor("sense-complete")
    event = {"status": "done", "job_name": "sense-complete", "job_status": "Completed"}
    assert s.execute_complete(context(), event) == s.poke(context()).xcom_value


def test_execute_complete_failure_paths(jobs: MotoJobs) -> None:
    submit("sense-events")
    jobs.set("sense-events", "Failed", "Failed", failure_reason="AlgorithmError: boom")
    s = sensor("sense-events")
    with pytest.raises(TrainingJobFailedError, match="AlgorithmError: boom"):
        s.execute_complete(context(), {"status": "done", "job_name": "sense-events"})
    with pytest.raises(TrainingJobTimeoutError, match="sensor timeout"):
        s.execute_complete(context(), {"status": "timeout", "job_name": "sense-events", "job_status": "InProgress"})
    assert jobs.calls["StopTrainingJob"] == 0  # the sensor never stops a job it did not start
    with pytest.raises(AirflowException, match="AccessDenied"):
        s.execute_complete(context(), {"status": "error", "job_name": "sense-events", "message": "AccessDenied"})


def test_print_log_prints_every_host_with_its_group(jobs: MotoJobs) -> None:
    submit("sense-logs")
    logs = boto3.client("logs", region_name="us-east-1")
    put_logs(logs, "sense-logs", "algo-1", [*toolkit_startup("algo-1", "dnn_group"), "epoch 1 loss 0.5"])
    put_logs(logs, "sense-logs", "algo-2", [*toolkit_startup("algo-2", "data_group"), "served 100 batches"])
    jobs.set("sense-logs", "Completed", "Completed")
    s = sensor("sense-logs", print_log=True)
    logged = record_logs(s)
    s.poke(context())
    text = logged.text()
    assert "[dnn_group/algo-1] epoch 1 loss 0.5" in text
    assert "[data_group/algo-2] served 100 batches" in text


def test_verify_and_botocore_config_reach_hook_and_trigger(jobs: MotoJobs) -> None:
    submit("sense-config")
    config = {"connect_timeout": 5}
    s = sensor("sense-config", deferrable=True, verify=False, botocore_config=config)
    assert s.make_hook().config.connect_timeout == 5 and s.make_hook().verify is False
    with pytest.raises(TaskDeferred) as info:
        s.execute(context())
    assert (info.value.trigger.verify, info.value.trigger.botocore_config) == (False, config)
