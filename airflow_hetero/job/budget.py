"""A training budget as SageMaker enforces it: the runtime cap that makes a cluster's worst case fit what is
left of ``max_cost`` (pure arithmetic, stdlib only; docs/cost.md).

The operator prices the cluster (overrides, the Price List, the offline endpoint's stand-in), adds up what
the task instance's earlier jobs cost (:func:`billed_cost` of each), and :func:`plan_budget` returns the
runtime cap: ``floor(left x 3600 / cluster price per hour) - stop window`` seconds, never above the job's own
MaxRuntime. :func:`capped_request` writes it into the request (MaxRuntimeInSeconds, MaxWaitTimeInSeconds
for spot, a tag saying so), so SageMaker stops the job at the cap even when no worker or triggerer is left.
The worst case uses on-demand prices even for spot (a spot job costs less, never more). A refusal is a
:class:`BudgetError` (a ValueError: no Airflow here).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_hetero.amounts import format_amount
from airflow_hetero.job.identity import TAG_PREFIX
from airflow_hetero.job.resource_config import GroupSpec, instance_groups
from airflow_hetero.sagemaker_facts import DEFAULT_MAX_RUNTIME_SECONDS, STOP_SIGNAL_WINDOW_SECONDS

__all__ = [
    "BUDGET_TAG",
    "DEFAULT_MIN_RUNTIME_SECONDS",
    "BudgetError",
    "BudgetPlan",
    "billed_cost",
    "budget_cap_in_tags",
    "budget_stop_message",
    "capped_request",
    "check_max_cost",
    "hourly_rate",
    "instance_types_of",
    "missing_prices",
    "plan_budget",
    "plan_request_budget",
    "requested_runtime",
]

#: The shortest run a budget allows by default, in seconds (the operator's ``budget_min_runtime_seconds``,
#: the CLI's ``--min-runtime``): a budget that buys less refuses before anything is submitted.
DEFAULT_MIN_RUNTIME_SECONDS = 300
#: Tag of a job whose MaxRuntimeInSeconds a budget set: its value is the cap in seconds.
BUDGET_TAG = f"{TAG_PREFIX}budget-runtime-cap"
_HOUR = 3600.0


class BudgetError(ValueError):
    """The budget refuses the job before it is submitted (too small, or a price is unknown)."""


def check_max_cost(value: Any) -> float | None:
    """``max_cost`` as a number > 0 (a rendered template may be a numeric string); None: no budget."""
    if value is None or value == "":
        return None
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise BudgetError(f"max_cost must be a positive number (the price settings' currency), got {value!r}")
    return number


def missing_prices(groups: Sequence[GroupSpec], prices: Mapping[str, float | None]) -> list[str]:
    """The instance types of ``groups`` without a price, in order, each once."""
    return [t for t in dict.fromkeys(g.instance_type or "" for g in groups) if prices.get(t) is None]


def hourly_rate(groups: Sequence[GroupSpec], prices: Mapping[str, float | None]) -> float:
    """The cluster's price per hour: sum over groups of count x price per instance-hour (every type priced)."""
    missing = missing_prices(groups, prices)
    if missing:
        raise BudgetError(f"no price for {', '.join(missing)}")
    return sum(g.instance_count * float(prices[g.instance_type or ""] or 0.0) for g in groups)


def requested_runtime(request: Mapping[str, Any]) -> int:
    """The request's MaxRuntimeInSeconds (the service's default when it gives none)."""
    return int((request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds") or DEFAULT_MAX_RUNTIME_SECONDS)


def _bills(describe: Mapping[str, Any]) -> bool:
    """True when a job has billable time, or may still have (not ended)."""
    running = describe.get("TrainingJobStatus") in ("InProgress", "Stopping")
    return bool(describe.get("BillableTimeInSeconds")) or running


def billed_cost(describe: Mapping[str, Any], prices: Mapping[str, float | None]) -> float:
    """What a job cost: BillableTimeInSeconds x its cluster's price per hour / 3600. A job not ended yet
    (no billable time) counts at its worst case: its MaxRuntime plus the stop window; a job that never
    started training costs 0 (a capacity failure bills nothing)."""
    groups = instance_groups(describe)
    if not _bills(describe):
        return 0.0
    billable = describe.get("BillableTimeInSeconds")
    if billable is None:  # not ended: its worst case
        billable = requested_runtime(describe) + STOP_SIGNAL_WINDOW_SECONDS
    return float(billable) * hourly_rate(groups, prices) / _HOUR


@dataclass(frozen=True)
class BudgetPlan:
    """What the budget allows the next job: its runtime cap and the worst case at that cap."""

    max_cost: float
    spent: float
    per_hour: float
    requested_runtime: int
    runtime_cap: int
    stop_window: int

    @property
    def left(self) -> float:
        """What is left of the budget before this job."""
        return self.max_cost - self.spent

    @property
    def worst_case(self) -> float:
        """The job's cost if it runs to the cap and uses the whole stop window (on-demand prices)."""
        return self.per_hour * (self.runtime_cap + self.stop_window) / _HOUR

    @property
    def lowered(self) -> bool:
        """True when the budget lowered the job's own MaxRuntime."""
        return self.runtime_cap < self.requested_runtime

    def describe(self, currency: str) -> str:
        """The task log's line: price per hour, what is left, the worst case and the cap."""
        cap = f"MaxRuntimeInSeconds {self.runtime_cap}" + (
            f" (lowered from {self.requested_runtime})" if self.lowered else " (the job's own)"
        )
        return (
            f"Budget: cluster {format_amount(self.per_hour)} {currency}/hour; max_cost {self.max_cost:g} {currency}, "
            f"spent by earlier attempts {format_amount(self.spent)}, left {format_amount(self.left)}; worst case "
            f"{format_amount(self.worst_case)} {currency} at {cap} + {self.stop_window} s stop window"
        )


def plan_budget(
    max_cost: float,
    spent: float,
    per_hour: float,
    requested: int,
    *,
    min_runtime: int,
    stop_window: int = STOP_SIGNAL_WINDOW_SECONDS,
    currency: str,
) -> BudgetPlan:
    """The runtime cap: the longest run whose worst case (``per_hour`` x (cap + ``stop_window``)) fits what is
    left, at most ``requested``; BudgetError when it is below ``min_runtime`` seconds."""
    left = max_cost - spent
    fits = requested if per_hour <= 0 else math.floor(left * _HOUR / per_hour) - stop_window
    cap = min(requested, fits)
    if cap < min_runtime:
        afford = "nothing" if cap <= 0 else f"{cap} s"
        need = per_hour * (min_runtime + stop_window) / _HOUR
        raise BudgetError(
            f"max_cost {max_cost:g} {currency}: {format_amount(left)} left after earlier attempts "
            f"({format_amount(spent)} spent) buys {afford} of this cluster at {format_amount(per_hour)} "
            f"{currency}/hour after the {stop_window} s stop window, below the minimum useful run of "
            f"{min_runtime} s (budget_min_runtime_seconds): it needs {format_amount(need)} {currency} left; "
            "nothing was submitted"
        )
    return BudgetPlan(max_cost, spent, per_hour, requested, cap, stop_window)


def price_problem(instance_type: str, reason: str | None, sources: str) -> BudgetError:
    """The refusal for a type without a price: the type, why, and the sources tried
    (:func:`airflow_hetero.pricing.settings.price_sources`; a budget never guesses)."""
    return BudgetError(
        f"no price for {instance_type}: {reason or 'no source knows it'} (sources tried: {sources}); a budget "
        f"never guesses a price: give prices={{'{instance_type}': <price per instance-hour>}}; nothing was submitted"
    )


def plan_request_budget(
    request: Mapping[str, Any],
    earlier: Sequence[Mapping[str, Any]],
    prices: Mapping[str, tuple[float | None, str | None]],
    *,
    max_cost: float,
    sources: str,
    min_runtime: int,
    stop_window: int = STOP_SIGNAL_WINDOW_SECONDS,
    currency: str,
) -> BudgetPlan:
    """The budget of ``request`` after the ``earlier`` jobs (DescribeTrainingJob answers) of the task instance;
    ``prices``: instance type -> (price per instance-hour or None, why none). BudgetError: a price is unknown
    (the type, the reason, ``sources``) or the budget is below ``min_runtime``."""
    per_hour = {name: price for name, (price, _) in prices.items()}
    for job in (request, *(j for j in earlier if _bills(j))):
        for name in missing_prices(instance_groups(job), per_hour):
            raise price_problem(name, prices.get(name, (None, None))[1], sources)
    spent = sum(billed_cost(job, per_hour) for job in earlier)
    rate = hourly_rate(instance_groups(request), per_hour)
    return plan_budget(
        max_cost,
        spent,
        rate,
        requested_runtime(request),
        min_runtime=min_runtime,
        stop_window=stop_window,
        currency=currency,
    )


def instance_types_of(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every instance type of the requests or descriptions given, in order, each once."""
    return list(dict.fromkeys(g.instance_type for job in jobs for g in instance_groups(job) if g.instance_type))


def capped_request(request: Mapping[str, Any], plan: BudgetPlan) -> dict[str, Any]:
    """``request`` with MaxRuntimeInSeconds at the cap, a spot job's MaxWaitTimeInSeconds lowered by as much
    (its wait allowance kept, so MaxWait >= MaxRuntime holds) and the :data:`BUDGET_TAG`."""
    out = copy.deepcopy(dict(request))
    stopping = out.setdefault("StoppingCondition", {})
    wait = stopping.get("MaxWaitTimeInSeconds")
    stopping["MaxRuntimeInSeconds"] = plan.runtime_cap
    if wait is not None and out.get("EnableManagedSpotTraining"):
        lowered_by = plan.requested_runtime - plan.runtime_cap
        stopping["MaxWaitTimeInSeconds"] = max(plan.runtime_cap, int(wait) - lowered_by)
    tags = [t for t in out.get("Tags") or [] if t.get("Key") != BUDGET_TAG]
    out["Tags"] = [*tags, {"Key": BUDGET_TAG, "Value": str(plan.runtime_cap)}]
    return out


def budget_cap_in_tags(tags: Sequence[Mapping[str, Any]]) -> int | None:
    """The runtime cap a budget set, from a job's tags (None: no budget capped it)."""
    for tag in tags:
        if tag.get("Key") == BUDGET_TAG and str(tag.get("Value") or "").isdigit():
            return int(tag["Value"])
    return None


def budget_stop_message(describe: Mapping[str, Any], cap: int | None) -> str | None:
    """The task's message when SageMaker stopped a job at the runtime cap a budget set; None otherwise."""
    if cap is None or describe.get("SecondaryStatus") != "MaxRuntimeExceeded":
        return None
    billable = describe.get("BillableTimeInSeconds")
    return (
        f"Training job {describe.get('TrainingJobName')} was stopped by its budget: SageMaker ended it at the "
        f"runtime cap of {cap} s that max_cost allowed (MaxRuntimeExceeded; billable {billable} s). Raise "
        "max_cost, or make the job shorter or cheaper (docs/cost.md)"
    )
