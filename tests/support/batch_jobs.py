"""Helpers for tests of the offline AWS Batch queue: gated jobs, payloads, waiting on statuses.

A gated job's hosts each write ``<gate dir>/<TrainingJobName>.<host>.started`` and then wait for
``<gate dir>/release-<payload name>`` (or ``fail-<payload name>``: exit 3) before they end, so a
test decides when each job ends and waits for events, never for a time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.local_jobkit import put_source, request

GATED = """
import os, pathlib, sys, time
gate = pathlib.Path(os.environ["GATE_DIR"])
name, host = os.environ["GATE_NAME"], os.environ.get("SM_CURRENT_HOST", "host")
(gate / f"{os.environ.get('TRAINING_JOB_NAME', name)}.{host}.started").write_text("")
deadline = time.monotonic() + 300
while time.monotonic() < deadline:
    if (gate / f"fail-{name}").exists():
        print("gated job told to fail", file=sys.stderr, flush=True)
        sys.exit(3)
    if (gate / f"release-{name}").exists():
        print(f"released {name}", flush=True)
        sys.exit(0)
    time.sleep(0.05)
sys.exit(4)
"""
ONE = (("main", "ml.c5.xlarge", 1),)


def gated_payload(s3: Any, gate: Path, name: str, groups: tuple[tuple[str, str, int], ...] = ONE, **more: Any) -> str:
    """The CreateTrainingJob payload (JSON) of a gated job called ``name`` (its TrainingJobName too)."""
    body = request(name, put_source(s3, name, GATED), groups=groups)
    body["Environment"] = {"GATE_DIR": str(gate), "GATE_NAME": name}
    body.update(more)
    return json.dumps(body)


def release(gate: Path, name: str) -> None:
    (gate / f"release-{name}").write_text("")


def fail(gate: Path, name: str) -> None:
    (gate / f"fail-{name}").write_text("")


def until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``check`` (every 50 ms) until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def status(batch: Any, job_id: str) -> str:
    return str(batch.describe_service_job(jobId=job_id)["status"])


def wait_status(batch: Any, job_id: str, *wanted: str, timeout: float = 60.0) -> dict[str, Any]:
    """Describe ``job_id`` until its status is one of ``wanted``; the answer. A final status not wanted fails."""

    def reached() -> dict[str, Any] | None:
        described: dict[str, Any] = batch.describe_service_job(jobId=job_id)
        if described["status"] in wanted:
            return described
        assert described["status"] not in ("SUCCEEDED", "FAILED"), described
        return None

    result: dict[str, Any] = until(reached, f"{job_id} to be {wanted}", timeout)
    return result


def make_queue(
    batch: Any, name: str, capacity: int, *, policy: str | None = None, state: str = "ENABLED", **queue: Any
) -> str:
    """A service environment ``<name>-env`` of ``capacity`` instances and a queue ``name`` over it; the queue ARN."""
    batch.create_service_environment(
        serviceEnvironmentName=f"{name}-env",
        serviceEnvironmentType="SAGEMAKER_TRAINING",
        state=state,
        capacityLimits=[{"maxCapacity": capacity, "capacityUnit": "NUM_INSTANCES"}],
    )
    if policy is not None:
        queue["schedulingPolicyArn"] = policy
    made = batch.create_job_queue(
        jobQueueName=name,
        priority=1,
        jobQueueType="SAGEMAKER_TRAINING",
        serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": f"{name}-env"}],
        **queue,
    )
    return str(made["jobQueueArn"])


def submit(batch: Any, queue: str, job_name: str, payload: str, **more: Any) -> str:
    """SubmitServiceJob; the job id."""
    made = batch.submit_service_job(
        jobName=job_name, jobQueue=queue, serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload=payload, **more
    )
    return str(made["jobId"])


def training_name(described: dict[str, Any], attempt: int = -1) -> str:
    """The training job name of an attempt (the ARN's last part is the name, lower case)."""
    return str(described["attempts"][attempt]["serviceResourceId"]["value"]).rpartition("/")[2]


def peak_instances(sm: Any, jobs: list[tuple[str, int]]) -> int:
    """The most instances the training jobs ``(name, instances)`` held at once, from their records
    (each holds its instances from CreationTime to TrainingEndTime)."""
    events = []
    for name, count in jobs:
        record = sm.describe_training_job(TrainingJobName=name)
        events.append((record["CreationTime"].timestamp(), count))
        events.append((record["TrainingEndTime"].timestamp(), -count))
    held = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):  # an end before a start at the same instant
        held += delta
        peak = max(peak, held)
    return peak
