"""HeteroTrainingTrigger: serialization, and asyncio runs against a moto server over HTTP.

``mock_aws`` does not reach aiobotocore, so the trigger talks to a ThreadedMotoServer through an
Airflow connection whose extra carries the server's ``endpoint_url``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from support.moto_jobs import MotoJobs, aws_connection_env, moto_server, served_jobs, server_error, throttling
from support.moto_jobs import create_job as create
from support.trigger_runs import NO_BOTO_RETRY, first_event, triggers_on

from airflow_hetero.job.waiting import WAIT_MARGIN_SECONDS
from airflow_hetero.triggers import HeteroTrainingTrigger

CONN_ID = "moto_trigger"
trigger = triggers_on(CONN_ID)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def jobs(server_url: str, monkeypatch: pytest.MonkeyPatch) -> MotoJobs:
    return served_jobs(CONN_ID, server_url, monkeypatch)


def test_serialize_round_trip() -> None:
    from importlib import import_module

    def import_string(path: str) -> Any:
        module, _, name = path.rpartition(".")
        return getattr(import_module(module), name)

    original = HeteroTrainingTrigger(
        "job-1",
        aws_conn_id="aws_x",
        region_name="eu-west-1",
        poll_interval=15,
        deadline=1_900_000_000.5,
        verify=False,
        botocore_config={"retries": {"mode": "standard"}},
    )
    path, kwargs = original.serialize()
    assert path == "airflow_hetero.triggers.HeteroTrainingTrigger"
    assert json.loads(json.dumps(kwargs)) == kwargs  # plain values only
    rebuilt = import_string(path)(**kwargs)
    assert rebuilt.serialize() == (path, kwargs)


def test_old_serialized_kwargs_still_load() -> None:
    """A trigger serialized with only the required kwargs (older release) still loads."""
    rebuilt = HeteroTrainingTrigger(**{"job_name": "j"})
    assert rebuilt.serialize()[1]["deadline"] is None


def test_default_deadline_comes_from_the_job() -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    t = HeteroTrainingTrigger("j")
    describe = {"CreationTime": created, "StoppingCondition": {"MaxRuntimeInSeconds": 7200}}
    assert t._deadline_for(describe) == created.timestamp() + 7200 + WAIT_MARGIN_SECONDS
    spot = {
        "CreationTime": created,
        "EnableManagedSpotTraining": True,
        "StoppingCondition": {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 10800},
    }
    assert t._deadline_for(spot) == created.timestamp() + 7200 + 10800 + WAIT_MARGIN_SECONDS
    # Five days of allowed runtime means five days of waiting: no hidden 30-minute cap.
    long_job = {"CreationTime": created, "StoppingCondition": {"MaxRuntimeInSeconds": 5 * 86400}}
    assert t._deadline_for(long_job) - created.timestamp() > 5 * 86400
    assert HeteroTrainingTrigger("j", deadline=123.0)._deadline_for(describe) == 123.0


async def test_completes_after_status_progression(jobs: MotoJobs, server_url: str) -> None:
    create(server_url, "trig-ok")
    jobs.script(
        "trig-ok",
        {"status": "InProgress", "secondary": "Downloading"},
        {"status": "InProgress", "secondary": "Training"},
        {"status": "Completed", "secondary": "Completed"},
    )
    event = await first_event(trigger("trig-ok"))
    assert event["status"] == "done"
    assert event["job_name"] == "trig-ok"
    assert event["job_status"] == "Completed"
    assert event["failure_reason"] is None
    assert jobs.calls["DescribeTrainingJob"] == 3


async def test_failed_job_carries_the_reason(jobs: MotoJobs, server_url: str) -> None:
    create(server_url, "trig-failed")
    reason = "AlgorithmError: ExecuteUserScriptError: exit code 1"
    jobs.script("trig-failed", {"status": "Failed", "secondary": "Failed", "failure_reason": reason})
    event = await first_event(trigger("trig-failed"))
    assert (event["status"], event["job_status"], event["failure_reason"]) == ("done", "Failed", reason)


async def test_stopped_job_is_reported_as_stopped(jobs: MotoJobs, server_url: str) -> None:
    create(server_url, "trig-stopped")
    jobs.script("trig-stopped", {"status": "Stopping"}, {"status": "Stopped", "secondary": "Stopped"})
    event = await first_event(trigger("trig-stopped"))
    assert (event["status"], event["job_status"]) == ("done", "Stopped")


async def test_throttling_and_5xx_bursts_do_not_end_the_wait(jobs: MotoJobs, server_url: str) -> None:
    create(server_url, "trig-throttled")
    # More consecutive errors than one poll's retry budget (10): the next poll carries on.
    burst: list[Any] = [throttling() for _ in range(8)] + [server_error() for _ in range(6)]
    jobs.script("trig-throttled", *burst, {"status": "Completed", "secondary": "Completed"})
    event = await first_event(trigger("trig-throttled"))
    assert (event["status"], event["job_status"]) == ("done", "Completed")
    assert jobs.calls["DescribeTrainingJob"] == len(burst) + 1


async def test_connection_errors_do_not_end_the_wait(jobs: MotoJobs, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens on port 9: every poll fails to connect until the deadline passes.
    name, value = aws_connection_env("dead_endpoint", "http://127.0.0.1:9")
    monkeypatch.setenv(name, value)
    t = HeteroTrainingTrigger(
        "trig-unreachable",
        aws_conn_id="dead_endpoint",
        poll_interval=0.01,
        deadline=time.time() + 1.0,
        botocore_config={**NO_BOTO_RETRY, "connect_timeout": 1},
    )
    event = await first_event(t)
    assert event["status"] == "timeout"
    assert event["job_status"] is None


async def test_missing_job_is_a_permanent_error(jobs: MotoJobs) -> None:
    event = await first_event(trigger("trig-never-created"))
    assert event["status"] == "error"
    assert "ValidationException" in event["message"] or "Could not find" in event["message"]


async def test_deadline_passed_gives_a_timeout_event(jobs: MotoJobs, server_url: str) -> None:
    create(server_url, "trig-deadline")
    event = await first_event(trigger("trig-deadline", deadline=time.time() - 1))
    assert event["status"] == "timeout"
    assert event["job_status"] == "InProgress"
