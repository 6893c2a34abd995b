"""The bounds every wait shares: the job's own limits, the not-found grace, the deferral deadline."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from airflow_hetero.job.waiting import (
    DEFAULT_MAX_RUNTIME_SECONDS,
    NOT_FOUND_GRACE_SECONDS,
    WAIT_MARGIN_SECONDS,
    deferral_deadline,
    not_found_yet,
    past_job_limit,
    wait_limit_seconds,
)


def test_wait_limit_is_the_jobs_own_limits_plus_a_margin() -> None:
    assert wait_limit_seconds({}) == DEFAULT_MAX_RUNTIME_SECONDS + WAIT_MARGIN_SECONDS
    assert wait_limit_seconds({"StoppingCondition": {"MaxRuntimeInSeconds": 600}}) == 600 + WAIT_MARGIN_SECONDS
    spot = {
        "EnableManagedSpotTraining": True,
        "StoppingCondition": {"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 900},
    }
    assert wait_limit_seconds(spot) == 1500 + WAIT_MARGIN_SECONDS


def test_past_job_limit_counts_from_creation() -> None:
    limits = {"StoppingCondition": {"MaxRuntimeInSeconds": 60}}
    old = datetime.now(UTC) - timedelta(seconds=60 + WAIT_MARGIN_SECONDS + 5)
    assert past_job_limit({**limits, "CreationTime": old})
    assert not past_job_limit({**limits, "CreationTime": datetime.now(UTC)})
    assert not past_job_limit({**limits, "CreationTime": "not a time"})


def test_not_found_yet_is_one_rule_with_one_default() -> None:
    gone = type("E", (Exception,), {"response": {"Error": {"Code": "ValidationException", "Message": "not found"}}})()
    now = time.time()
    assert not_found_yet(gone, now) and not_found_yet(gone, now - NOT_FOUND_GRACE_SECONDS + 5)
    assert not not_found_yet(gone, now - NOT_FOUND_GRACE_SECONDS - 1)
    assert not not_found_yet(gone, None) and not not_found_yet(gone, now, grace=0)
    assert not_found_yet(gone, now - 100, grace=200)
    assert not not_found_yet(Exception("boom"), now)


def test_deferral_deadline_takes_the_nearest_limit() -> None:
    start = time.time()
    assert deferral_deadline(start, max_ingestion_time=None, wait_limit=None, execution_timeout=None) == (
        None,
        None,
        None,
    )
    deadline, reason, airflow_timeout = deferral_deadline(
        start, max_ingestion_time=None, wait_limit=7200.0, execution_timeout=None
    )
    assert deadline == start + 7200 and reason == "the job's MaxRuntime (+ MaxWait) plus margin (7200s)"
    assert airflow_timeout is None
    deadline, reason, airflow_timeout = deferral_deadline(
        start, max_ingestion_time=600.0, wait_limit=7200.0, execution_timeout=300.0
    )
    assert deadline == start + 300 - 30 and reason == "execution_timeout (300s)"  # a margin before Airflow's
    assert airflow_timeout == pytest.approx(300, abs=2)
