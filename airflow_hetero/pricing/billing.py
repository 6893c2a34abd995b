"""What a training job billed, in money: pricing arithmetic shared by the summary, the queue's attempts and
the model asset's extra (pure: stdlib and :mod:`~.price_list` only).

:func:`billed_cost`, the run's cost in the model asset's extra (docs/lineage.md): the job's
BillableTimeInSeconds x every group's count x price per instance-hour / 3600; for a managed spot job the
billable time already has the spot saving in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NotRequired, TypedDict

from airflow_hetero.amounts import round_amount
from airflow_hetero.pricing.price_list import Price

__all__ = ["BilledCost", "billed_cost", "cluster_hourly", "money"]


class BilledCost(TypedDict):
    """The run's cost in the model asset's extra (:func:`billed_cost`)."""

    total: float | None  # None: see ``reason``
    currency: str
    billable_seconds: float | None
    prices: dict[str, float | None]  # instance type -> price per instance-hour used
    basis: str
    reason: NotRequired[str]


def money(value: float) -> float:
    """An amount as every cost states it (:func:`airflow_hetero.amounts.round_amount`: 4 decimals, a tiny
    non-zero amount kept non-zero)."""
    return round_amount(value)


def cluster_hourly(groups: Iterable[tuple[str | None, int]], prices: Mapping[str, Price]) -> float | None:
    """The cluster's price per hour: each ``(instance type, count)`` x its price (None when one is unknown)."""
    total = 0.0
    for instance_type, count in groups:
        price = prices.get(instance_type or "")
        if price is None or price.per_hour is None:
            return None
        total += count * price.per_hour
    return total


def billed_cost(
    instance_groups: Iterable[Mapping[str, Any]],
    billable_seconds: float | None,
    prices: Mapping[str, Price],
    *,
    currency: str,
) -> BilledCost:
    """What the run cost by the job's own BillableTimeInSeconds: ``billable_seconds`` x every group's
    count x price per instance-hour / 3600 (``instance_groups``: ``[{"name", "type", "count"}]``, the
    operator's result dict). For a managed spot job the billable time already has the spot saving in it.
    ``total`` None with ``reason`` when the time or a group's price is unknown."""
    groups = [(g.get("type"), int(g.get("count") or 0)) for g in instance_groups]
    out: BilledCost = {
        "total": None,
        "currency": currency,
        "billable_seconds": billable_seconds,
        "prices": {t: prices[t].per_hour if t in prices else None for t, _ in groups if t},
        "basis": "BillableTimeInSeconds x each group's instance count x its price per instance-hour",
    }
    missing = [t or "an unnamed type" for t, _ in groups if not t or t not in prices or prices[t].per_hour is None]
    if missing:
        reasons = {p.reason for t in missing if (p := prices.get(t)) is not None and p.reason}
        out["reason"] = f"no price for {', '.join(missing)}" + (f": {'; '.join(sorted(reasons))}" if reasons else "")
    elif billable_seconds is None:
        out["reason"] = "the job reported no BillableTimeInSeconds"
    elif not groups:
        out["reason"] = "the job reported no instance groups"
    else:
        hourly = cluster_hourly(groups, prices)
        out["total"] = money(float(billable_seconds) * (hourly or 0.0) / 3600)
    return out
