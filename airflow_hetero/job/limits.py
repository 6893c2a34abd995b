"""The operator's "over a limit?" ladder, and the one wording of each limit it can pass.

A synchronous wait checks, once per poll: a Stopping job stopping longer than
``stopping_timeout_seconds``; ``max_ingestion_time`` since the task started; the job's MaxRuntime
(+ MaxWait) plus margin since its creation. A deferred wait's trigger gives up at the first of
those deadlines and ``execute_complete`` says which, in the same words. Pure: the caller measures
the times, stops the job and raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_hetero.job.outcome import ASKED_TO_STOP, TrainingJobTimeoutError, still_stopping_error
from airflow_hetero.job.waiting import JOB_LIMIT, past_job_limit, wait_limit_seconds


@dataclass(frozen=True)
class PassedLimit:
    """A limit the wait has passed: the task's error, and whether to ask SageMaker to stop the job."""

    error: TrainingJobTimeoutError
    stop: bool


def ingestion_exceeded(max_ingestion_time: float) -> str:
    """``exceeded max_ingestion_time (3600s)``: the operator's own bound on the whole wait."""
    return f"exceeded max_ingestion_time ({max_ingestion_time}s)"


def passed_limit(
    name: str,
    describe: dict[str, Any] | None,
    *,
    waited: float,
    stopping_for: float | None,
    max_ingestion_time: float | None,
    stopping_timeout: float,
) -> PassedLimit | None:
    """The first limit passed, in the ladder's order, or None (``describe`` None: the poll failed).

    ``waited``: seconds since the task started; ``stopping_for``: seconds since a poll first saw
    the job Stopping (None: not seen). A Stopping job is already stopping, so only its own bound applies.
    """
    status = str((describe or {}).get("TrainingJobStatus"))
    if describe is not None and status == "Stopping":
        if stopping_for is not None and stopping_for > stopping_timeout:
            return PassedLimit(still_stopping_error(name, stopping_timeout), stop=False)
        return None
    if max_ingestion_time is not None and waited > max_ingestion_time:
        message = f"Training job {name} {ingestion_exceeded(max_ingestion_time)}{ASKED_TO_STOP}"
        return PassedLimit(TrainingJobTimeoutError(message, job_name=name, status=status), stop=True)
    if describe is not None and past_job_limit(describe):
        message = (
            f"Training job {name} still {status} {wait_limit_seconds(describe)}s after its creation, "
            f"beyond its {JOB_LIMIT}{ASKED_TO_STOP}"
        )
        return PassedLimit(TrainingJobTimeoutError(message, job_name=name, status=status), stop=True)
    return None


def deferred_timeout_message(deadline_reason: str | None, max_ingestion_time: float | None) -> str:
    """What ``execute_complete`` says of a trigger's timeout: the deadline it reached, in the ladder's words."""
    if deadline_reason:
        return f"reached its deadline: {deadline_reason}"
    if max_ingestion_time is not None:
        return ingestion_exceeded(max_ingestion_time)
    return f"did not finish within its {JOB_LIMIT}"
