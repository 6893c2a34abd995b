"""Every way a task ends while its job runs stops the job; a triggerer restart does not.

Airflow's signals, checked in its source (3.3.2 installed here; 2.11 by its documented API):
``on_kill`` on the worker (kill, clear or mark while running, sync ``execution_timeout``), trigger
``on_kill`` (3.3+: mark failed/success or clear while deferred), ``resume_execution("__fail__")``
(deferral timeout, ``execution_timeout`` while deferred, trigger crash) and, on 2.11, the
trigger's ``cleanup()`` seeing the task no longer deferred. Trigger tests talk to a moto server
over HTTP (aiobotocore is not covered by ``mock_aws``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
from support.example_jobs import Group, example_job
from support.moto_jobs import MotoJobs, aws_connection_env, hetero_request, mocked_jobs, moto_server, served_jobs
from support.moto_jobs import create_job as create
from support.trigger_runs import NO_BOTO_RETRY, first_event, triggers_on

from airflow_hetero._compat import TaskDeferred
from airflow_hetero.definition import naming
from airflow_hetero.job.identity import TaskIdentity
from airflow_hetero.job.outcome import TrainingJobTimeoutError
from airflow_hetero.job.waiting import DEFAULT_MAX_RUNTIME_SECONDS, WAIT_MARGIN_SECONDS
from airflow_hetero.operators import HeteroTrainingOperator
from airflow_hetero.triggers import HeteroTrainingTrigger
from airflow_hetero.triggers import training as trigger_module

CONN_ID = "moto_task_end"
trigger = triggers_on(CONN_ID)
JOB = example_job("task-end", groups=[Group("g", "ml.c5.xlarge")], max_run=7200)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def served(server_url: str, monkeypatch: pytest.MonkeyPatch) -> MotoJobs:
    return served_jobs(CONN_ID, server_url, monkeypatch)


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    with mocked_jobs(monkeypatch) as jobs:
        yield jobs


def context(map_index: int = -1) -> dict[str, Any]:
    return {"ti": MagicMock(dag_id="retrain", task_id="train", run_id="r1", map_index=map_index)}


def operator(**kwargs: Any) -> HeteroTrainingOperator:
    kwargs.setdefault("job", JOB)
    kwargs.setdefault("print_log", False)
    kwargs.setdefault("check_interval", 0.01)
    return HeteroTrainingOperator(task_id="train", aws_conn_id=None, **kwargs)


def job_name(attempt: int = 0, map_index: int = -1) -> str:
    return naming.derived_job_name(
        "task-end", naming.task_key("task-end", "retrain", "train", "r1", map_index), attempt
    )


# -- deferred: the trigger's side ---------------------------------------------------------------


async def test_trigger_on_kill_stops_an_owned_job_only(served: MotoJobs, server_url: str) -> None:
    create(server_url, "owned")
    create(server_url, "watched")
    await trigger("owned", stop_on_kill=True).on_kill()
    await trigger("watched", stop_on_kill=False).on_kill()
    assert served.job("owned").training_job_status == "Stopping"
    assert served.job("watched").training_job_status == "InProgress"
    assert served.calls["StopTrainingJob"] == 1


@pytest.mark.parametrize(
    ("left_deferral", "fired", "stops"),
    [(True, False, 1), (False, False, 0), (True, True, 0)],
    ids=["marked-or-cleared-or-timed-out", "triggerer-restart", "trigger-fired"],
)
async def test_airflow_2_cleanup_stops_the_job_only_when_the_task_left_deferral(
    served: MotoJobs, server_url: str, monkeypatch: pytest.MonkeyPatch, left_deferral: bool, fired: bool, stops: int
) -> None:
    monkeypatch.setattr(trigger_module, "HAS_TRIGGER_ON_KILL", False)  # Airflow 2.11: no trigger on_kill
    create(server_url, "af2-job")
    t = trigger("af2-job", stop_on_kill=True)
    monkeypatch.setattr(t, "task_left_deferral", lambda: left_deferral)
    t.fired = fired
    await t.cleanup()
    assert served.calls["StopTrainingJob"] == stops


@pytest.mark.skipif(not trigger_module.HAS_TRIGGER_ON_KILL, reason="Airflow 2.11: cleanup() is where jobs are stopped")
async def test_airflow_3_cleanup_leaves_stopping_to_on_kill(
    served: MotoJobs, server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(server_url, "af3-job")
    t = trigger("af3-job", stop_on_kill=True)
    monkeypatch.setattr(t, "task_left_deferral", lambda: True)
    await t.cleanup()  # a restart also runs cleanup(): stopping here would kill jobs on every deploy
    assert served.calls["StopTrainingJob"] == 0


def test_task_left_deferral_without_a_task_instance_is_false() -> None:
    assert HeteroTrainingTrigger("j").task_left_deferral() is False


async def test_deadline_counts_from_the_task_start_when_describe_never_succeeds(
    served: MotoJobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, value = aws_connection_env("dead_endpoint", "http://127.0.0.1:9")
    monkeypatch.setenv(name, value)
    started = time.time() - (DEFAULT_MAX_RUNTIME_SECONDS + WAIT_MARGIN_SECONDS) + 1.0  # limits end in a second
    t = HeteroTrainingTrigger(
        "never-described",
        aws_conn_id="dead_endpoint",
        poll_interval=0.05,
        started_at=started,
        botocore_config={**NO_BOTO_RETRY, "connect_timeout": 1},
    )
    event = await first_event(t)
    assert event["status"] == "timeout" and event["job_status"] is None


async def test_not_found_just_after_our_create_is_transient(served: MotoJobs, server_url: str) -> None:
    t = trigger("late-visible", created_at=time.time())
    served.script("late-visible", {"status": "Completed", "secondary": "Completed"})
    loop = asyncio.get_running_loop()
    loop.call_later(0.3, lambda: loop.run_in_executor(None, create, server_url, "late-visible"))
    event = await first_event(t)
    assert (event["status"], event["job_status"]) == ("done", "Completed")


async def test_not_found_after_the_grace_the_operator_passed_is_an_error(served: MotoJobs, server_url: str) -> None:
    t = trigger("never-created", created_at=time.time(), not_found_grace_seconds=0)
    event = await first_event(t)
    assert event["status"] == "error", event
    assert "never-created" in event["message"] or "not found" in event["message"].lower(), event


def test_new_kwargs_survive_serialization() -> None:
    t = HeteroTrainingTrigger("j", started_at=1.5, created_at=2.5, deadline_reason="execution_timeout (60s)")
    kwargs = t.serialize()[1]
    assert (kwargs["started_at"], kwargs["created_at"], kwargs["deadline_reason"]) == (
        1.5,
        2.5,
        "execution_timeout (60s)",
    )
    assert HeteroTrainingTrigger(**{"job_name": "old"}).started_at == pytest.approx(time.time(), abs=5)


# -- deferred: the worker's side ----------------------------------------------------------------


def test_execution_timeout_bounds_a_deferred_wait_and_is_passed_to_airflow(jobs: MotoJobs) -> None:
    op = operator(deferrable=True, execution_timeout=timedelta(minutes=10))
    before = time.time()
    with pytest.raises(TaskDeferred) as info:
        op.execute(context())
    after = time.time()
    trigger_ = info.value.trigger
    # both count from the task's start (between before and after: submitting takes seconds on a
    # loaded machine), the trigger's deadline a minute before Airflow's
    assert before <= trigger_.started_at <= after
    assert trigger_.deadline == pytest.approx(trigger_.started_at + 600 - 60)
    assert trigger_.deadline_reason == "execution_timeout (600s)"
    assert info.value.timeout is not None
    assert 600 - (after - before) <= info.value.timeout.total_seconds() <= 600
    event = {
        "status": "timeout",
        "job_name": job_name(),
        "job_status": "InProgress",
        "deadline_reason": trigger_.deadline_reason,
    }
    with pytest.raises(TrainingJobTimeoutError, match=r"reached its deadline: execution_timeout \(600s\)"):
        operator(deferrable=True).execute_complete(context(), event)
    assert jobs.job(job_name()).training_job_status == "Stopping" and jobs.calls["StopTrainingJob"] == 1


def deferral_failures() -> tuple[type[BaseException], ...]:
    """What Airflow raises when a deferred task resumes in ``__fail__`` (3.x: two kinds; 2.11: one)."""
    try:
        from airflow.sdk.exceptions import TaskDeferralError, TaskDeferralTimeout
    except ImportError:  # Airflow 2.11
        from airflow.exceptions import TaskDeferralError

        return (TaskDeferralError,)
    return (TaskDeferralError, TaskDeferralTimeout)


@pytest.mark.parametrize("error", ["Trigger timeout", "Trigger failure"])
def test_airflow_failing_a_deferred_task_stops_its_job(jobs: MotoJobs, error: str) -> None:
    with pytest.raises(TaskDeferred):
        operator(deferrable=True).execute(context())
    with pytest.raises(deferral_failures()):
        operator(deferrable=True).resume_execution("__fail__", {"error": error}, context())
    assert jobs.job(job_name()).training_job_status == "Stopping"
    assert jobs.calls["StopTrainingJob"] == 1 and jobs.calls["CreateTrainingJob"] == 1


def test_fail_resumption_leaves_other_task_instances_jobs_alone(jobs: MotoJobs) -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    other = TaskIdentity("someone", "else", "r9")
    client.create_training_job(**other.stamp(hetero_request(job_name())))
    with pytest.raises(deferral_failures()):
        operator(deferrable=True).resume_execution("__fail__", {"error": "Trigger timeout"}, context())
    assert jobs.job(job_name()).training_job_status == "InProgress" and jobs.calls["StopTrainingJob"] == 0


def test_a_normal_resumption_does_not_stop_anything(jobs: MotoJobs) -> None:
    with pytest.raises(TaskDeferred):
        operator(deferrable=True).execute(context())
    jobs.set(job_name(), "Completed", "Completed")
    result = operator(deferrable=True).resume_execution(
        "execute_complete", {"event": {"status": "done", "job_name": job_name()}}, context()
    )
    assert result["status"] == "Completed" and jobs.calls["StopTrainingJob"] == 0
