"""A training job's phases, from its ``SecondaryStatusTransitions``: each status with its own start and end (pure).

SageMaker lists the job's SecondaryStatus transitions (Starting, Downloading, Training, Uploading; for managed
spot Interrupted and Restarting; Stopping, Stopped, Completed, Failed ...) each with a ``StartTime`` and, once the
next began, an ``EndTime``. A trace shows each as a span of its own (:mod:`airflow_hetero.operators.job_trace`);
the end states are instants, not phases. Times are epoch seconds; a ``datetime`` (botocore) or epoch number alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: SecondaryStatus values that end a job: no phase of their own.
END_STATES = frozenset({"Completed", "Failed", "Stopped", "MaxRuntimeExceeded", "MaxWaitTimeExceeded"})
#: The statuses of a managed spot interruption.
SPOT_INTERRUPTED = "Interrupted"


@dataclass(frozen=True)
class Phase:
    """One SecondaryStatus of a job, from ``start`` to ``end`` (epoch seconds), with SageMaker's message."""

    status: str
    start: float
    end: float
    message: str


def epoch(value: Any) -> float | None:
    """``value`` (a ``datetime`` or epoch seconds) as epoch seconds; None when it is neither."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def job_window(describe: Mapping[str, Any], now: float) -> tuple[float, float]:
    """(start, end) of the job: its CreationTime (else its first transition, else ``now``) to its
    TrainingEndTime (else its last transition's end, else ``now``)."""
    transitions = list(describe.get("SecondaryStatusTransitions") or [])
    first = epoch(transitions[0].get("StartTime")) if transitions else None
    start = epoch(describe.get("CreationTime")) or first or now
    last = transitions[-1] if transitions else {}
    end = epoch(describe.get("TrainingEndTime")) or epoch(last.get("EndTime")) or epoch(last.get("StartTime")) or now
    return start, max(start, end)


def phases(describe: Mapping[str, Any], now: float) -> list[Phase]:
    """The job's phases in order: each transition but the end states, ending at its EndTime, else at the next
    transition's start, else at the job's end."""
    transitions = list(describe.get("SecondaryStatusTransitions") or [])
    _, job_end = job_window(describe, now)
    out = []
    for n, item in enumerate(transitions):
        status = str(item.get("Status"))
        start = epoch(item.get("StartTime"))
        if status in END_STATES or start is None:
            continue
        following = epoch(transitions[n + 1].get("StartTime")) if n + 1 < len(transitions) else None
        end = epoch(item.get("EndTime")) or following or job_end
        out.append(Phase(status, start, max(start, end), str(item.get("StatusMessage") or "")))
    return out
