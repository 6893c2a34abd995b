"""A service job's attempts: the training job each one creates, and the status Batch reads from it.

Statuses follow the latest attempt's training job (:data:`~airflow_hetero.sagemaker_facts.BATCH_STATUS_FOR_SECONDARY`):
SCHEDULED (Starting), STARTING (Downloading), RUNNING (Training, Uploading), then SUCCEEDED
(Completed) or FAILED (Failed, **and Stopped**). ``statusReason`` is ``Received status from
SageMaker:`` and the training job's FailureReason or status message. When an attempt ends:

* Completed: SUCCEEDED.
* the job was terminated (TerminateServiceJob): FAILED with the reason given there.
* Failed with SageMaker's ``CapacityError``: back to RUNNABLE after the requeue delay; the attempt
  uses none of the retry strategy's (``counted`` False).
* otherwise (Failed, Stopped, the attempt's time-out): RUNNABLE again when the retry strategy says so
  (:meth:`~.models.ServiceJob.retries`), else FAILED.

Creating an attempt's training job can be refused: a ``ValidationException`` (a bad payload: Batch
does not check it at submit) fails the job with no attempt; any other refusal (an account quota,
the endpoint's own host limit, a shutdown) requeues it like a CapacityError.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local.batch.models import Attempt, ServiceJob

#: Active statuses: an attempt's training job exists and holds the job's instances.
ACTIVE = frozenset({"SCHEDULED", "STARTING", "RUNNING"})
#: The statusReason of an attempt Batch stopped at ``timeoutConfig.attemptDurationSeconds``.
TIMEOUT_REASON = "Job attempt duration exceeded timeout"


class TrainingRefused(Exception):
    """The endpoint's training service refused a CreateTrainingJob (its error code and message)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class TrainingJobs(Protocol):
    """The endpoint's training jobs, as the queue uses them (the API layer provides them)."""

    def create(self, request: dict[str, Any], region: str) -> str:
        """CreateTrainingJob; the job's ARN, or :class:`TrainingRefused`."""

    def describe(self, name: str) -> dict[str, Any] | None:
        """The DescribeTrainingJob answer of ``name``, None when there is no such job."""

    def stop(self, name: str) -> None:
        """StopTrainingJob (nothing when the job has ended)."""


@dataclass(frozen=True)
class Timing:
    """Milliseconds: the clock's now and the requeue delay after a CapacityError."""

    now: int
    requeue_delay_ms: int


def reason_of(record: dict[str, Any]) -> str:
    """Batch's statusReason for a training job: the prefix, then its FailureReason or last status message."""
    if record.get("TrainingJobStatus") == "Failed" and record.get("FailureReason"):
        return facts.BATCH_STATUS_REASON_PREFIX + str(record["FailureReason"])
    transitions = record.get("SecondaryStatusTransitions") or []
    message = transitions[-1].get("StatusMessage") if transitions else None
    return facts.BATCH_STATUS_REASON_PREFIX + str(
        message or record.get("SecondaryStatus") or record["TrainingJobStatus"]
    )


def refresh(job: ServiceJob, training: TrainingJobs, timing: Timing) -> bool:
    """Move ``job`` on from its latest attempt's training job; True when it changed."""
    attempt = job.latest()
    if job.status not in ACTIVE or attempt is None:
        return False
    record = training.describe(attempt.training_job_name)
    if record is None:
        record = {"TrainingJobStatus": "Failed", "FailureReason": "InternalServerError: the training job is gone"}
    status = record["TrainingJobStatus"]
    before = (job.status, job.status_reason)
    if status in ("InProgress", "Stopping"):
        if status == "InProgress":
            job.status = facts.BATCH_STATUS_FOR_SECONDARY.get(str(record.get("SecondaryStatus")), job.status)
        job.status_reason = reason_of(record)
        if job.status in ("STARTING", "RUNNING") and job.started_at is None:
            job.started_at = timing.now
        _time_out(job, attempt, training, timing)
        return (job.status, job.status_reason) != before
    _end_attempt(job, attempt, record, timing)
    return True


def _time_out(job: ServiceJob, attempt: Attempt, training: TrainingJobs, timing: Timing) -> None:
    limit = (job.timeout_config or {}).get("attemptDurationSeconds")
    if limit is None or attempt.timed_out or timing.now - attempt.started_at < int(limit) * 1000:
        return
    attempt.timed_out = True
    job.set_latest(attempt)
    training.stop(attempt.training_job_name)


def _end_attempt(job: ServiceJob, attempt: Attempt, record: dict[str, Any], timing: Timing) -> None:
    status = record["TrainingJobStatus"]
    reason = TIMEOUT_REASON if attempt.timed_out and status == "Stopped" else reason_of(record)
    attempt.stopped_at = timing.now
    attempt.status_reason = reason
    capacity = status == "Failed" and str(record.get("FailureReason", "")).startswith("CapacityError")
    attempt.counted = not capacity
    job.set_latest(attempt)
    job.environment = None
    if job.started_at is None and record.get("TrainingStartTime") is not None:  # it ran, however briefly
        job.started_at = attempt.started_at
    if status == "Completed":
        _final(job, "SUCCEEDED", reason, timing)
    elif job.is_terminated:
        _final(job, "FAILED", job.terminate_reason or reason, timing)
    elif capacity:
        requeue(job, reason, timing)
    elif job.retries(reason):
        requeue(job, reason, timing, delay=False)
    else:
        _final(job, "FAILED", reason, timing)


def _final(job: ServiceJob, status: str, reason: str, timing: Timing) -> None:
    job.status, job.status_reason, job.stopped_at = status, reason, timing.now
    job.environment = job.not_before = job.blocked_since = None


def terminate_now(job: ServiceJob, reason: str, timing: Timing) -> None:
    """A job with no training job running (SUBMITTED, RUNNABLE) ends FAILED at once."""
    job.is_terminated, job.terminate_reason = True, reason
    _final(job, "FAILED", reason, timing)


def requeue(job: ServiceJob, reason: str, timing: Timing, *, delay: bool = True) -> None:
    """Back to RUNNABLE (after the requeue delay when ``delay``), keeping ``reason``."""
    job.status, job.status_reason = "RUNNABLE", reason
    job.runnable_since = timing.now
    job.not_before = timing.now + timing.requeue_delay_ms if delay else None
    job.environment = job.blocked_since = None


def start_attempt(job: ServiceJob, environment: str, region: str, training: TrainingJobs, timing: Timing) -> None:
    """Create the next attempt's training job ``AWSBatch<payload TrainingJobName><32 hex>``; SCHEDULED."""
    try:
        request = json.loads(job.payload)
        if not isinstance(request, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        _final(
            job,
            "FAILED",
            f"{facts.BATCH_STATUS_REASON_PREFIX}ValidationException: serviceRequestPayload is "
            f"not a CreateTrainingJob request in JSON ({exc})",
            timing,
        )
        return
    name = f"{facts.BATCH_TRAINING_JOB_PREFIX}{request.get('TrainingJobName', '')}{uuid.uuid4().hex}"
    try:
        job_arn = training.create({**request, "TrainingJobName": name}, region)
    except TrainingRefused as exc:
        reason = f"{facts.BATCH_STATUS_REASON_PREFIX}{exc.code}: {exc.message}"
        if exc.code == "ValidationException":
            _final(job, "FAILED", reason, timing)
        else:
            requeue(job, reason, timing)
        return
    job.attempts.append(Attempt(training_job_name=name, training_job_arn=job_arn, started_at=timing.now).to_json())
    job.status, job.status_reason = "SCHEDULED", None
    job.scheduled_at, job.environment = timing.now, environment
    job.not_before = job.blocked_since = None
