"""What each instance group cost, what its waiting cost, and what the verdict's suggestions would change (pure).

Formulas (documented in docs/instance-groups.md):

* a group's cost = ``instance_seconds`` x price per instance-hour / 3600; its waiting cost =
  the verdict's ``waiting_instance_seconds`` x price / 3600; the job's total and waiting cost are
  the sums (None when a group's price is unknown, with the reason in ``notes``);
* managed spot training: the on-demand price x instance count x TrainingTimeInSeconds x
  (BillableTimeInSeconds / TrainingTimeInSeconds), the job's own ratio; an estimate; each group's
  spot saving = its ``spot_saved_instance_seconds`` (count x (TrainingTimeInSeconds -
  BillableTimeInSeconds)) x price / 3600, what the same time would have cost on demand less the cost;
* scaling the bottleneck group from n to m: per hour ``(m - n) x price``; the run's length under the
  verdict's model is ``T x u / min(target, u x m / n)`` (u: the waiting group's busy percent): the
  waiting group's utilisation grows with the bottleneck's count until it reaches the target; per run
  the new hourly cost of every group over the new length minus the old cost;
* an over-provisioned group from n to k: ``-(n - k) x price`` per hour, the run's length unchanged.

The run's cost in the model asset's extra is pricing arithmetic, not the summary's:
:func:`airflow_hetero.pricing.billing.billed_cost`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_hetero.pricing.billing import cluster_hourly, money
from airflow_hetero.pricing.price_list import Price

if TYPE_CHECKING:  # the summary's shape loads when a task runs, not when a DAG file is parsed
    from airflow_hetero.logs.shape import (
        Cost,
        GroupCost,
        GroupSummary,
        GroupVerdict,
        PriceEntry,
        SpotRatio,
        SuggestionEffect,
        Verdict,
    )

_NAMES = {"gpu": "GPU", "cpu": "CPU"}


def spot_ratio(describe: Mapping[str, Any]) -> SpotRatio | None:
    """The job's BillableTimeInSeconds / TrainingTimeInSeconds when it used managed spot training."""
    if not describe.get("EnableManagedSpotTraining"):
        return None
    billable, training = describe.get("BillableTimeInSeconds"), describe.get("TrainingTimeInSeconds")
    ratio = round(billable / training, 4) if billable is not None and training else None
    return {"billable_seconds": billable, "training_seconds": training, "ratio": ratio}


def _group_cost(group: GroupSummary, judged: GroupVerdict | None, price: Price | None) -> GroupCost:
    seconds = group.get("instance_seconds")
    waiting = judged.get("waiting_instance_seconds") if judged else None
    out: GroupCost = {
        "instance_type": group.get("instance_type"),
        "instance_count": group.get("instance_count", 0),
        "instance_seconds": seconds,
        "price_per_hour": price.per_hour if price else None,
        "cost": None,
        "waiting_instance_seconds": waiting,
        "waiting_cost": None,
    }
    if price is None or price.per_hour is None:
        out["reason"] = price.reason if price and price.reason else "the instance type is not known"
    elif seconds is None:
        out["reason"] = "no instance-seconds: the job has not started training"
    else:
        out["cost"] = money(float(seconds) * price.per_hour / 3600)
        saved = group.get("spot_saved_instance_seconds")
        if saved is not None:
            out["spot_saving"] = money(float(saved) * price.per_hour / 3600)
        if waiting is not None:
            out["waiting_cost"] = money(float(waiting) * price.per_hour / 3600)
    return out


def job_cost(
    groups: Mapping[str, GroupSummary],
    verdict: Verdict | None,
    prices: Mapping[str, Price],
    *,
    currency: str,
    describe: Mapping[str, Any],
    partial: bool,
) -> Cost:
    """The summary's ``cost``: per group, the total and the waiting cost, and the prices used."""
    judged: Mapping[str, GroupVerdict] = verdict["groups"] if verdict else {}
    per_group = {
        name: _group_cost(g, judged.get(name), prices.get(g.get("instance_type") or "")) for name, g in groups.items()
    }
    unknown = [name for name, c in per_group.items() if "reason" in c]
    notes = [f"total unknown: no cost for {', '.join(unknown)} (see its reason)"] if unknown else []
    costs = [c["cost"] for c in per_group.values()]
    known = bool(costs) and all(c is not None for c in costs)
    waits = [c["waiting_cost"] for c in per_group.values()]
    waited = known and all(w is not None for w in waits)
    spot = spot_ratio(describe)
    if spot is not None:
        ratio = spot["ratio"]
        notes.append(
            "managed spot training: on-demand price x billable time, which AWS reduces by the spot saving "
            + (
                f"(billable/training = {ratio:g}, {1 - ratio:.0%} saved): "
                if ratio is not None
                else "(not known yet): "
            )
            + "an estimate"
        )
    savings = [c.get("spot_saving") for c in per_group.values()]
    if partial:
        notes.append("the job is still running: the cost so far")
    entries: dict[str, PriceEntry] = {name: price.as_dict() for name, price in sorted(prices.items())}  # type: ignore[misc]
    out: Cost = {
        "currency": currency,
        "total": money(sum(c for c in costs if c is not None)) if known else None,
        "waiting": money(sum(w for w in waits if w is not None)) if waited else None,
        "groups": per_group,
        "prices": entries,
        "estimate": spot is not None or partial,
        "spot": spot,
        "notes": notes,
    }
    if savings and None not in savings:
        out["spot_saving"] = money(sum(s for s in savings if s is not None))
    return out


def priced_nonzero(instance_seconds: float | None, per_hour: float | None) -> bool:
    """Whether an amount priced from ``instance_seconds`` at ``per_hour`` cannot be 0: a stored 0 of it was
    rounded away by an older release (``format_amount(..., known_nonzero=...)`` then reads it ``< 0.0001``)."""
    return bool(instance_seconds) and bool(per_hour)


def _hourly(groups: Mapping[str, GroupSummary], prices: Mapping[str, Price]) -> float | None:
    """The cluster's cost per hour: every group's count x price (None when one is unknown)."""
    return cluster_hourly([(g.get("instance_type"), g.get("instance_count", 0)) for g in groups.values()], prices)


def _run_seconds(group: GroupSummary) -> float | None:
    seconds, count = group.get("instance_seconds"), group.get("instance_count") or 0
    return float(seconds) / count if seconds is not None and count else None


def scaling_effect(
    name: str,
    suggested: int,
    groups: Mapping[str, GroupSummary],
    prices: Mapping[str, Price],
    *,
    currency: str,
    speedup: float = 1.0,
    assumption: str,
) -> SuggestionEffect:
    """The money and time of running ``name`` with ``suggested`` instances, the run ``speedup`` x faster."""
    group = groups[name]
    count = int(group.get("instance_count") or 0)
    price = prices.get(group.get("instance_type") or "")
    effect: SuggestionEffect = {
        "instance_count": count,
        "suggested_count": suggested,
        "currency": currency,
        "per_hour": None,
        "per_run": None,
        "assumption": assumption,
    }
    run = _run_seconds(group)
    if run is not None:
        effect["run_seconds"] = round(run, 1)
        effect["run_seconds_after"] = round(run / speedup, 1)
    if price is None or price.per_hour is None:
        effect["reason"] = f"no price for {group.get('instance_type')}: " + (
            price.reason if price and price.reason else "unknown instance type"
        )
        return effect
    effect["per_hour"] = money((suggested - count) * price.per_hour)
    hourly = _hourly(groups, prices)
    if hourly is None or run is None:
        effect["reason"] = "the run's cost needs every group's price and the run's length"
        return effect
    after = hourly + (suggested - count) * price.per_hour
    effect["per_run"] = money(after * run / speedup / 3600 - hourly * run / 3600)
    return effect


def bottleneck_speedup(count: int, suggested: int, waiting_busy: float, target: float) -> float:
    """How much faster the run gets when the bottleneck goes from ``count`` to ``suggested`` instances:
    the waiting group's utilisation grows in proportion, up to ``target`` (never slower)."""
    if count < 1 or waiting_busy <= 0:
        return 1.0
    return max(1.0, min(target, waiting_busy * suggested / count) / waiting_busy)


def bottleneck_assumption(waiting: str, resource: str, busy: float, target: float, speedup: float) -> str:
    return (
        f"if {waiting}'s {_NAMES.get(resource, resource)}s go from {busy:.0f}% to {min(target, busy * speedup):.0f}% "
        f"busy and the job's work stays the same: the run {1 - 1 / speedup:.0%} shorter"
    )
