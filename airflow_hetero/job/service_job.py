"""What a service job's description says: its state, its attempts' training jobs, its owner, how it ended.

Read from DescribeServiceJob answers and ListServiceJobs summaries alike (AWS Batch, DESIGN.md section 10).
Every attempt of a service job is a training job named ``AWSBatch<payload name><32 hex>``; its ARN is the
attempt's ``serviceResourceId``. Pure: no AWS SDK, no Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.job.identity import IDENTITY_TAG

__all__ = [
    "attempt_training_jobs",
    "blocked_message",
    "blocked_reason",
    "identity_of_service_job",
    "is_final",
    "latest_training_job",
    "queued_seconds",
    "service_job_result",
    "state_line",
    "training_job_name",
]


def training_job_name(arn: str) -> str:
    """The name in a training job's ARN (``arn:aws:sagemaker:<region>:<account>:training-job/<name>``)."""
    return arn.rsplit("/", 1)[-1]


def _resource_name(item: Mapping[str, Any] | None) -> str | None:
    resource = (item or {}).get("serviceResourceId") or {}
    value = resource.get("value")
    return training_job_name(str(value)) if value else None


def latest_training_job(service_job: Mapping[str, Any]) -> str | None:
    """The training job of the service job's latest attempt (a description or a summary); None before one."""
    return _resource_name(service_job.get("latestAttempt"))


def attempt_training_jobs(service_job: Mapping[str, Any]) -> list[str]:
    """Every attempt's training job, oldest first (the latest included, also while it runs)."""
    names = [n for n in (_resource_name(a) for a in service_job.get("attempts") or []) if n]
    latest = latest_training_job(service_job)
    if latest and latest not in names:
        names.append(latest)
    return names


def identity_of_service_job(service_job: Mapping[str, Any]) -> str | None:
    """The identity digest in a described service job's tags, if any."""
    value = (service_job.get("tags") or {}).get(IDENTITY_TAG)
    return str(value) if value else None


#: The start of a RUNNABLE job's statusReason when no service environment of its queue can ever run it.
MISCONFIGURATION = facts.BATCH_MISCONFIGURATION_REASON.split(":", 1)[0] + ":"


def blocked_reason(service_job: Mapping[str, Any]) -> str | None:
    """Batch's reason when the job waits RUNNABLE for what will never come (a job larger than every service
    environment of its queue: ``MISCONFIGURATION:...``), else None."""
    reason = str(service_job.get("statusReason") or "")
    return reason if service_job.get("status") == "RUNNABLE" and reason.startswith(MISCONFIGURATION) else None


def blocked_message(service_job: Mapping[str, Any], reason: str) -> str:
    """The task's error for a job its queue can never run."""
    return (
        f"Service job {service_job.get('jobName')} can never run in job queue {service_job.get('jobQueue')}: "
        f"{reason}; it was terminated"
    )


def is_final(service_job: Mapping[str, Any]) -> bool:
    """True once the service job SUCCEEDED or FAILED."""
    return service_job.get("status") in facts.BATCH_FINAL_STATUSES


def state_line(service_job: Mapping[str, Any], place: int | None = None) -> str:
    """``RUNNABLE (reason), place 3 in the queue``: what the task log says of a state."""
    status = str(service_job.get("status"))
    reason = service_job.get("statusReason")
    line = status + (f" ({reason})" if reason else "")
    if status == "RUNNABLE" and place is not None:
        line += f", place {place} in the queue" if place > 0 else ", not in the first 100 of the queue"
    latest = latest_training_job(service_job)
    if latest and status not in ("SUBMITTED", "RUNNABLE"):
        line += f", training job {latest}"
    return line


def failure_message(service_job: Mapping[str, Any], training: Mapping[str, Any] | None) -> str:
    """Why a FAILED service job failed: Batch's statusReason and its last training job's FailureReason."""
    name = service_job.get("jobName")
    reason = service_job.get("statusReason") or "no statusReason given"
    message = f"Service job {name} ({service_job.get('jobId')}) ended FAILED: {reason}"
    if training:
        status = training.get("TrainingJobStatus")
        failure = training.get("FailureReason") or "no FailureReason given"
        message += f"; its training job {training.get('TrainingJobName')} ended {status}: {failure}"
    else:
        message += "; no training job was started"
    return message


def service_job_result(service_job: Mapping[str, Any]) -> dict[str, Any]:
    """The ``service_job`` part of the task's result (plain JSON)."""
    return {
        "job_id": service_job.get("jobId"),
        "job_arn": service_job.get("jobArn"),
        "job_name": service_job.get("jobName"),
        "job_queue": service_job.get("jobQueue"),
        "status": service_job.get("status"),
        "status_reason": service_job.get("statusReason"),
        "attempts": attempt_training_jobs(service_job),
        "queued_seconds": queued_seconds(service_job),
    }


def queued_seconds(service_job: Mapping[str, Any]) -> float | None:
    """How long the service job waited in its queue: from its ``createdAt`` to its first attempt's ``startedAt``
    (Batch's times are in milliseconds); None before an attempt started, or when Batch did not say."""
    attempts = [a for a in service_job.get("attempts") or [] if isinstance(a, Mapping)]
    first = attempts[0] if attempts else service_job.get("latestAttempt")
    created, started = service_job.get("createdAt"), (first or {}).get("startedAt")
    if not isinstance(created, int | float) or not isinstance(started, int | float) or started < created:
        return None
    return round((started - created) / 1000, 3)
