"""A service job's attempts on the offline queue: capacity requeues, retry rules, termination, time limits.

Event-driven: gated jobs end when the test says (support.batch_jobs); the RUNNABLE time-limit
action is driven by the queue's own clock, which the test moves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.batch_jobs import (
    fail,
    gated_payload,
    make_queue,
    release,
    submit,
    training_name,
    until,
    wait_status,
)

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local import BatchOptions, LocalEndpoint
from airflow_hetero.local.batch.lifecycle import TIMEOUT_REASON

pytestmark = pytest.mark.slow

ENDPOINT_RUN = {"stop_grace": 1.0}
ENDPOINT_BATCH = BatchOptions(poll_interval=0.05, requeue_delay=0.3)
P3 = "ml.p3.2xlarge"


@pytest.fixture(scope="module")
def batch(endpoint: LocalEndpoint) -> Any:
    return endpoint.client("batch")


def _training_jobs(sm: Any, prefix: str) -> list[str]:
    listed = sm.list_training_jobs(NameContains=prefix, MaxResults=100)["TrainingJobSummaries"]
    return [s["TrainingJobName"] for s in listed]


def test_a_capacity_error_requeues_without_using_an_attempt(
    endpoint: LocalEndpoint, batch: Any, sm: Any, s3: Any, tmp_path: Path
) -> None:
    make_queue(batch, "requeue", 4)
    endpoint.set_capacity({P3: 0})
    try:
        job = submit(
            batch, "requeue", "needs-p3", gated_payload(s3, tmp_path, "capjob", (("dnn", P3, 1),)),
            retryStrategy={"attempts": 1},
        )  # fmt: skip
        requeued = until(
            lambda: (d := batch.describe_service_job(jobId=job))["attempts"] and d["status"] == "RUNNABLE" and d,
            "the first attempt's CapacityError",
        )
    finally:
        endpoint.set_capacity({P3: None})
    assert requeued["statusReason"] == facts.BATCH_STATUS_REASON_PREFIX + facts.CAPACITY_ERROR_REASON
    assert requeued["attempts"][0]["statusReason"] == requeued["statusReason"]
    wait_status(batch, job, "RUNNING")
    release(tmp_path, "capjob")
    done = wait_status(batch, job, "SUCCEEDED")
    names = [training_name(done, i) for i in range(len(done["attempts"]))]
    assert len(names) >= 2 and len(set(names)) == len(names)  # each attempt its own training job
    assert done["latestAttempt"]["serviceResourceId"] == done["attempts"][-1]["serviceResourceId"]
    failed = [sm.describe_training_job(TrainingJobName=n) for n in names[:-1]]
    assert {f["TrainingJobStatus"] for f in failed} == {"Failed"}
    assert "BillableTimeInSeconds" not in failed[0]


def test_retry_rules_match_status_reason_globs(batch: Any, s3: Any, tmp_path: Path) -> None:
    make_queue(batch, "retry", 4)
    retried = submit(
        batch, "retry", "retried", gated_payload(s3, tmp_path, "retried"),
        retryStrategy={"attempts": 3, "evaluateOnExit": [
            {"action": "RETRY", "onStatusReason": "*exited with code 3*"}, {"action": "EXIT", "onStatusReason": "*"}]},
    )  # fmt: skip
    exited = submit(
        batch, "retry", "exited", gated_payload(s3, tmp_path, "exited"),
        retryStrategy={"attempts": 3, "evaluateOnExit": [{"action": "EXIT", "onStatusReason": "Received status*"}]},
    )  # fmt: skip
    default = submit(batch, "retry", "default", gated_payload(s3, tmp_path, "default"), retryStrategy={"attempts": 2})
    for name in ("retried", "exited", "default"):
        fail(tmp_path, name)
    counts = {}
    for name, job in (("retried", retried), ("exited", exited), ("default", default)):
        ended = wait_status(batch, job, "FAILED")
        counts[name] = len(ended["attempts"])
        assert ended["statusReason"].startswith(facts.BATCH_STATUS_REASON_PREFIX + "AlgorithmError: host algo-1")
        assert "exited with code 3" in ended["statusReason"]
        assert all(a["statusReason"] == ended["attempts"][0]["statusReason"] for a in ended["attempts"])
    assert counts == {"retried": 3, "exited": 1, "default": 2}


def test_terminate_while_runnable_creates_no_training_job_and_while_running_stops_it(
    batch: Any, sm: Any, s3: Any, tmp_path: Path
) -> None:
    make_queue(batch, "term", 1)
    running = submit(batch, "term", "term-running", gated_payload(s3, tmp_path, "trun"))
    waiting = submit(batch, "term", "term-waiting", gated_payload(s3, tmp_path, "twait"))
    wait_status(batch, running, "RUNNING")
    wait_status(batch, waiting, "RUNNABLE")
    batch.terminate_service_job(jobId=waiting, reason="cleared by the test")
    gone = batch.describe_service_job(jobId=waiting)
    assert (gone["status"], gone["statusReason"], gone["isTerminated"]) == ("FAILED", "cleared by the test", True)
    assert gone["attempts"] == [] and "latestAttempt" not in gone

    batch.terminate_service_job(jobId=running, reason="killed by the test")
    stopped = wait_status(batch, running, "FAILED")
    assert (stopped["statusReason"], stopped["isTerminated"]) == ("killed by the test", True)
    record = sm.describe_training_job(TrainingJobName=training_name(stopped))
    assert record["TrainingJobStatus"] == "Stopped"
    assert _training_jobs(sm, "twait") == []  # the job terminated while RUNNABLE never had one
    assert len(_training_jobs(sm, "trun")) == 1


def test_an_attempt_longer_than_its_timeout_is_stopped(batch: Any, s3: Any, tmp_path: Path) -> None:
    make_queue(batch, "timeout", 1)
    job = submit(
        batch, "timeout", "slow", gated_payload(s3, tmp_path, "slow"), timeoutConfig={"attemptDurationSeconds": 1}
    )
    ended = wait_status(batch, job, "FAILED")
    assert ended["statusReason"] == TIMEOUT_REASON
    assert ended["attempts"][0]["statusReason"] == TIMEOUT_REASON


def test_a_bad_payload_is_accepted_at_submit_and_fails_later(batch: Any, sm: Any) -> None:
    make_queue(batch, "badpay", 1)
    not_json = submit(batch, "badpay", "not-json", "this is not JSON")
    refused = submit(batch, "badpay", "refused", json.dumps({"TrainingJobName": "refused-req", "RoleArn": "x"}))
    failed = wait_status(batch, not_json, "FAILED")
    assert failed["statusReason"].startswith(facts.BATCH_STATUS_REASON_PREFIX + "ValidationException: ")
    assert failed["attempts"] == []
    failed = wait_status(batch, refused, "FAILED")
    assert failed["statusReason"].startswith(facts.BATCH_STATUS_REASON_PREFIX + "ValidationException: ")
    assert "validation error" in failed["statusReason"] and failed["attempts"] == []
    assert _training_jobs(sm, "refused-req") == []


def test_the_runnable_time_limit_terminates_a_job_blocked_at_the_head(
    endpoint: LocalEndpoint, batch: Any, sm: Any, s3: Any, tmp_path: Path
) -> None:
    make_queue(
        batch, "limited", 1,
        jobStateTimeLimitActions=[{"reason": "waited too long", "state": "RUNNABLE", "maxTimeSeconds": 600,
                                   "action": "TERMINATE"}],
    )  # fmt: skip
    described = batch.describe_job_queues(jobQueues=["limited"])["jobQueues"][0]
    assert described["jobStateTimeLimitActions"] == [
        {"reason": "waited too long", "state": "RUNNABLE", "maxTimeSeconds": 600, "action": "TERMINATE"}
    ]
    backend = endpoint.batch
    real = backend.clock
    offset = [0]
    backend.clock = lambda: real() + offset[0]
    try:
        head = submit(batch, "limited", "limit-big", gated_payload(s3, tmp_path, "lbig", (("a", "ml.c5.xlarge", 2),)))
        until(lambda: batch.describe_service_job(jobId=head).get("statusReason"), "the MISCONFIGURATION reason")
        offset[0] = 599_000
        backend.wake()
        backend.tick()
        assert batch.describe_service_job(jobId=head)["status"] == "RUNNABLE"
        offset[0] = 600_000
        backend.tick()
        ended = batch.describe_service_job(jobId=head)
    finally:
        backend.clock = real
    assert (ended["status"], ended["statusReason"], ended["isTerminated"]) == ("FAILED", "waited too long", True)
    assert _training_jobs(sm, "lbig") == []
