"""The operator's "over a limit?" ladder and its wording (the same words the wait used before)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_hetero.job.limits import deferred_timeout_message, passed_limit
from airflow_hetero.job.outcome import ASKED_TO_STOP, TrainingJobTimeoutError, outcome_from_event


def describe(status: str, age: float = 0.0, **extra: Any) -> dict[str, Any]:
    created = datetime.now(UTC) - timedelta(seconds=age)
    return {"TrainingJobName": "j", "TrainingJobStatus": status, "CreationTime": created, **extra}


def check(answer: dict[str, Any] | None, **kw: Any) -> Any:
    args: dict[str, Any] = {"waited": 0.0, "stopping_for": None, "max_ingestion_time": None, "stopping_timeout": 60.0}
    return passed_limit("j", answer, **(args | kw))


def test_nothing_passed_while_within_every_limit() -> None:
    assert check(describe("InProgress")) is None
    assert check(None, waited=10.0, max_ingestion_time=60.0) is None
    assert check(describe("Stopping"), stopping_for=10.0) is None


def test_a_stopping_job_answers_to_its_stopping_timeout_only() -> None:
    passed = check(describe("Stopping", age=10**6), waited=10**6, stopping_for=61.0, max_ingestion_time=1.0)
    assert not passed.stop and str(passed.error) == (
        "Training job j is still Stopping after 60s (stopping_timeout_seconds)"
    )
    assert check(describe("Stopping", age=10**6), waited=10**6, stopping_for=1.0, max_ingestion_time=1.0) is None


def test_max_ingestion_time_comes_before_the_jobs_own_limit_and_applies_without_an_answer() -> None:
    for answer in (describe("InProgress", age=10**6), None):
        passed = check(answer, waited=3601.0, max_ingestion_time=3600)
        status = "InProgress" if answer else "None"
        assert passed.stop and (passed.error.job_name, passed.error.status) == ("j", status)
        assert str(passed.error) == "Training job j exceeded max_ingestion_time (3600s); it was asked to stop"


def test_the_jobs_maxruntime_plus_margin_since_its_creation() -> None:
    old = describe("InProgress", age=7200 + 3600 + 5, StoppingCondition={"MaxRuntimeInSeconds": 7200})
    passed = check(old)
    assert passed.stop and str(passed.error) == (
        "Training job j still InProgress 10800s after its creation, beyond its MaxRuntime (+ MaxWait) plus margin; "
        "it was asked to stop"
    )
    assert check(describe("InProgress", age=60, StoppingCondition={"MaxRuntimeInSeconds": 7200})) is None


def test_the_deferred_waits_wording() -> None:
    assert deferred_timeout_message("max_ingestion_time (60s)", 60) == "reached its deadline: max_ingestion_time (60s)"
    assert deferred_timeout_message(None, 60) == "exceeded max_ingestion_time (60s)"
    assert deferred_timeout_message("", None) == "did not finish within its MaxRuntime (+ MaxWait) plus margin"
    event = {"status": "timeout", "job_name": "j", "job_status": "InProgress", "secondary_status": "Training"}
    with pytest.raises(TrainingJobTimeoutError) as info:
        outcome_from_event(event, describe=dict, stop=lambda name: None, timeout_message="did not finish")
    assert str(info.value) == f"Training job j did not finish{ASKED_TO_STOP} (last status InProgress / Training)"
