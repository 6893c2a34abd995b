"""A queued job's attempts in the summary: each attempt's training job, what it billed, and the total (docs/queue.md).

In queue mode (AWS Batch service jobs) every attempt of the service job is a training job of its own; the
summary reads the latest one's logs and groups, and its ``queue_attempts`` says what every attempt cost:
:func:`earlier_attempts` prices the attempts before the summarised job (each one's DescribeTrainingJob,
its BillableTimeInSeconds x its groups' prices, :func:`airflow_hetero.pricing.billing.billed_cost`),
:func:`queue_attempts` adds the summarised job itself (the summary's own cost) and the totals.

Takes the describe and price functions it is given: no AWS SDK, no Airflow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_hetero.job.resource_config import stated_groups
from airflow_hetero.pricing.billing import billed_cost, money
from airflow_hetero.pricing.price_list import Price

if TYPE_CHECKING:
    from airflow_hetero.logs.shape import QueueAttempt, QueueAttempts

__all__ = ["earlier_attempts", "queue_attempts"]

#: A training job's end states: one that ended without BillableTimeInSeconds billed nothing.
_ENDED = frozenset({"Completed", "Failed", "Stopped"})


def _priced(name: str, describe: Mapping[str, Any], prices: Mapping[str, Price], currency: str) -> QueueAttempt:
    status = describe.get("TrainingJobStatus")
    billable = describe.get("BillableTimeInSeconds")
    if billable is None and status in _ENDED:  # never started training (e.g. a capacity failure): billed nothing
        billable = 0
    billed = billed_cost(stated_groups(describe), billable, prices, currency=currency)
    out: QueueAttempt = {
        "training_job": name,
        "status": str(status) if status is not None else None,
        "billable_seconds": billable,
        "cost": billed["total"],
    }
    if "reason" in billed:
        out["reason"] = billed["reason"]
    return out


def earlier_attempts(
    attempts: Sequence[str],
    latest: str,
    *,
    describe_training_job: Callable[[str], Mapping[str, Any]],
    prices: Callable[[list[str]], Mapping[str, Price]],
    currency: str,
) -> list[QueueAttempt]:
    """The training jobs of a service job's ``attempts`` (oldest first:
    :func:`airflow_hetero.job.service_job.attempt_training_jobs`) but ``latest`` (the summarised one), each
    described and priced (named as its DescribeTrainingJob spells it). An attempt that cannot be described has cost
    None and the error as its reason; other errors propagate."""
    out: list[QueueAttempt] = []
    for name in attempts:
        if name.lower() == latest.lower():  # an ARN's name is in lower case (SageMaker's names ignore case)
            continue
        try:
            describe = describe_training_job(name)
        except Exception as exc:  # e.g. an attempt deleted or out of reach: the others still count
            out.append(
                {
                    "training_job": name,
                    "status": None,
                    "billable_seconds": None,
                    "cost": None,
                    "reason": f"not described: {exc}"[:300],
                }
            )
            continue
        types = sorted({str(g["type"]) for g in stated_groups(describe) if g.get("type")})
        out.append(_priced(str(describe.get("TrainingJobName") or name), describe, prices(types), currency))
    return out


def _sum(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else money(sum(v or 0.0 for v in values))


def queue_attempts(
    service_job: Mapping[str, Any],
    earlier: Sequence[QueueAttempt],
    summary: Mapping[str, Any],
    *,
    currency: str,
) -> QueueAttempts:
    """The summary's ``queue_attempts``: the service job, ``earlier`` then the summarised job (its status,
    billable time and the summary's cost total), what the earlier ones cost and the total over every attempt
    (None when one is unknown)."""
    cost = summary.get("cost")
    total = cost.get("total") if isinstance(cost, Mapping) else None
    latest: QueueAttempt = {
        "training_job": str(summary.get("training_job_name")),
        "status": summary.get("status"),
        "billable_seconds": summary.get("billable_seconds"),
        "cost": total if isinstance(total, (int, float)) else None,
    }
    if latest["cost"] is None:
        latest["reason"] = "the summary has no cost total for this job"
    earlier_cost = _sum([a["cost"] for a in earlier])
    return {
        "service_job": str(service_job.get("jobName")),
        "job_id": str(service_job.get("jobId")),
        "job_queue": service_job.get("jobQueue"),
        "currency": currency,
        "attempts": [*earlier, latest],
        "earlier_cost": earlier_cost,
        "total": _sum([earlier_cost, latest["cost"]]),
    }
