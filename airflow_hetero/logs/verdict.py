"""Which instance group holds the job back: a verdict from a summary's utilisation (pure).

Each group is judged on its *primary* resource: its GPUs when CloudWatch has GPU datapoints for it,
else its CPUs, as the summary states them: a 0-100 percentage per device (the summary divided
SageMaker's figures by the instance's vCPUs or GPUs when it was built, see
:mod:`airflow_hetero.logs.capacity`; the verdict divides nothing). With the :class:`Thresholds`:

* a group at or above ``busy_percent`` is *saturated*; below ``waiting_percent`` it *waits*;
* a saturated group while another waits is the *bottleneck*: the suggestion scales it so the
  waiting group would reach ``target_percent`` (at most ``max_scale`` times as many instances);
* below ``idle_percent`` a group is *idle*; a group of several instances below
  ``over_provisioned_percent`` is *over-provisioned*, with the count that would reach the target;
* memory or disk at or above ``pressure_percent`` is noted.

Instance-seconds come from the summary; the share of them spent waiting is the share of a group's
series buckets in which its primary resource was below ``waiting_percent``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, cast

from airflow_hetero.amounts import format_amount
from airflow_hetero.logs.cost import bottleneck_assumption, bottleneck_speedup, scaling_effect
from airflow_hetero.pricing.price_list import PRICE_LIST_CURRENCY, Price
from airflow_hetero.sagemaker_facts import Capacity

if TYPE_CHECKING:
    from airflow_hetero.logs.shape import (
        GroupSummary,
        GroupVerdict,
        LogSummary,
        Series,
        SeriesKey,
        Suggestion,
        SuggestionEffect,
        Verdict,
        VerdictHeadline,
    )

_NAMES = {"gpu": "GPUs", "cpu": "CPUs"}


@dataclass(frozen=True)
class Thresholds:
    """The verdict's thresholds, in percent per device (documented in docs/instance-groups.md)."""

    busy_percent: float = 85.0
    waiting_percent: float = 50.0
    idle_percent: float = 10.0
    over_provisioned_percent: float = 30.0
    target_percent: float = 75.0
    pressure_percent: float = 90.0
    max_scale: float = 4.0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{item.name} must be a number, got {value!r}")
            if item.name == "max_scale":
                if value < 1:
                    raise ValueError(f"max_scale must be at least 1, got {value}")
            elif not 0 < value <= 100:
                raise ValueError(f"{item.name} must be in (0, 100], got {value}")
        if not self.idle_percent <= self.waiting_percent < self.busy_percent:
            raise ValueError(
                "thresholds must satisfy idle_percent <= waiting_percent < busy_percent, got "
                f"{self.idle_percent}, {self.waiting_percent}, {self.busy_percent}"
            )

    @classmethod
    def of(cls, value: Thresholds | Mapping[str, Any] | None) -> Thresholds:
        """Thresholds from themselves, a partial mapping (unknown names are an error) or None."""
        if value is None:
            return cls()
        if isinstance(value, Thresholds):
            return value
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown verdict threshold(s) {unknown}; known: {sorted(known)}")
        return cls(**{k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in value.items()})


def _devices(group: GroupSummary) -> Capacity:
    """The device counts the summary divided this group's figures by (None: unknown, figures summed)."""
    devices: Mapping[str, Any] = group.get("devices") or {}
    return Capacity(devices.get("cpus"), devices.get("gpus"))


def _primary(group: GroupSummary, cap: Capacity) -> tuple[Literal["gpu", "cpu"], int | None] | None:
    """(resource key, devices per instance) the group is judged on; None without datapoints."""
    util = group.get("utilization")
    gpu, cpu = (util.get("gpu"), util.get("cpu")) if util else (None, None)
    if gpu and gpu.get("avg") is not None:
        return "gpu", cap.gpus
    if cpu and cpu.get("avg") is not None:
        return "cpu", cap.cpus
    return None


def _series_values(series: Series | None, key: SeriesKey) -> list[float | int | None]:
    """The per-bucket averages of one metric of a series ([] when it has none)."""
    line = series.get(key) if series else None
    return list(line["avg"]) if line else []


def _waiting_share(series: Series | None, resource: SeriesKey, below: float) -> float | None:
    """Share of the series buckets (with data) in which ``resource`` was below ``below`` (per device)."""
    seen = [v for v in _series_values(series, resource) if v is not None]
    if not seen:
        return None
    waiting = sum(1 for v in seen if v < below)
    return round(waiting / len(seen), 3)


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == 0 else f"{value:.1f}"


def _assess(group: GroupSummary, cap: Capacity, limits: Thresholds) -> dict[str, Any]:
    """One group's entry: primary resource, busy and peak per device, state, waiting share, memory, disk.

    Still with its empty fields and its note: :func:`_compact` turns it into a :class:`GroupVerdict`.
    """
    util = group.get("utilization")
    entry: dict[str, Any] = {
        "resource": None,
        "busy_percent": None,
        "peak_percent": None,
        "state": "no_data",
        "instance_count": group.get("instance_count"),
        "cpus": cap.cpus,
        "gpus": cap.gpus,
        "instance_seconds": group.get("instance_seconds"),
        "waiting_share": None,
        "waiting_instance_seconds": None,
        "spot_saved_instance_seconds": group.get("spot_saved_instance_seconds"),
        "over_provisioned": False,
        "suggested_count": None,
    }
    primary = _primary(group, cap)
    stat = util.get(primary[0]) if util and primary else None
    average = stat.get("avg") if stat else None
    if primary is None or stat is None or average is None:
        return entry
    resource, devices = primary
    busy, peak = float(average), stat.get("max")
    entry.update(resource=resource, busy_percent=round(busy, 1))
    entry["peak_percent"] = round(peak, 1) if peak is not None else None
    if devices is None:
        entry["note"] = f"{resource} figure not divided by devices: unknown instance type"
    if busy >= limits.busy_percent:
        entry["state"] = "saturated"
    elif busy < limits.idle_percent:
        entry["state"] = "idle"
    elif busy < limits.waiting_percent:
        entry["state"] = "waiting"
    else:
        entry["state"] = "busy"
    share = _waiting_share(group.get("series"), resource, limits.waiting_percent)
    entry["waiting_share"] = share
    seconds = group.get("instance_seconds")
    if share is not None and seconds is not None:
        entry["waiting_instance_seconds"] = round(float(seconds) * share, 1)
    memory = util.get("memory") if util else None
    disk = [v for v in _series_values(group.get("series"), "disk") if v is not None]  # not in the table
    pressure = {"memory": memory.get("avg") if memory else None, "disk": sum(disk) / len(disk) if disk else None}
    for key, value in pressure.items():
        if value is not None:
            entry[f"{key}_percent"] = round(float(value), 1)
    return entry


def judge(summary: LogSummary, thresholds: Thresholds | Mapping[str, Any] | None = None) -> Verdict:
    """The verdict of a summary (see the module docstring); a plain JSON-able dict. Device counts are
    the summary's (``capacity_overrides`` of :func:`airflow_hetero.logs.summarize.summarize_training_job`)."""
    return judge_groups(summary.get("groups") or {}, partial=bool(summary.get("partial")), thresholds=thresholds)


def judge_groups(
    summary_groups: Mapping[str, GroupSummary],
    *,
    partial: bool,
    thresholds: Thresholds | Mapping[str, Any] | None = None,
    prices: Mapping[str, Price] | None = None,
    currency: str = PRICE_LIST_CURRENCY,
) -> Verdict:
    """The verdict of a summary's groups (``partial``: the job is still running); see :func:`judge`.

    Given ``prices`` (instance type -> :class:`~airflow_hetero.pricing.price_list.Price`), each
    suggestion carries its ``effect`` in ``currency`` (:func:`airflow_hetero.logs.cost.scaling_effect`)."""
    limits = Thresholds.of(thresholds)
    groups = {name: _assess(group, _devices(group), limits) for name, group in summary_groups.items()}
    judged = {name: g for name, g in groups.items() if g["busy_percent"] is not None}
    totals = [g for g in groups.values() if g["instance_seconds"] is not None]
    total_seconds = sum(float(g["instance_seconds"]) for g in totals)
    waited = [g["waiting_instance_seconds"] for g in groups.values() if g["waiting_instance_seconds"] is not None]
    verdict: Verdict = {
        "kind": "no_data",
        "bottleneck": None,
        "message": "",
        "suggestion": None,
        "groups": {},  # filled in at the end, from the assessments
        "idle_groups": [name for name, g in judged.items() if g["state"] == "idle"],
        "over_provisioned_groups": [],
        "notes": [],
        "thresholds": asdict(limits),
        "instance_seconds": round(total_seconds, 1) if totals else None,
        "waiting_instance_seconds": round(sum(waited), 1) if waited else None,
        "waiting_share": round(sum(waited) / total_seconds, 3) if waited and total_seconds > 0 else None,
    }

    def label(name: str) -> str:
        g = groups[name]
        return f"{name} {_NAMES[g['resource']]}"

    if partial:
        verdict["notes"].append("the job is still running: the verdict covers its time so far")
    for name, g in groups.items():
        for key in ("memory", "disk"):
            value = g.get(f"{key}_percent")
            if value is not None and value >= limits.pressure_percent:
                verdict["notes"].append(f"{name} {key} at {_fmt(value)}%: close to full")
        if g.get("note"):
            verdict["notes"].append(f"{name}: {g['note']}")

    if not judged:
        verdict["message"] = "No utilisation datapoints: no verdict"
        verdict["groups"] = _compact(groups)
        return verdict
    saturated = sorted(
        (n for n, g in judged.items() if g["state"] == "saturated"), key=lambda n: -judged[n]["busy_percent"]
    )
    waiting = sorted(
        (n for n, g in judged.items() if g["busy_percent"] < limits.waiting_percent),
        key=lambda n: (judged[n]["resource"] != "gpu", judged[n]["busy_percent"]),
    )
    bottleneck = saturated[0] if saturated else None
    waiters = [n for n in waiting if n != bottleneck]
    parts: list[str] = []
    if bottleneck and waiters:
        slow, b = waiters[0], judged[bottleneck]
        count = int(b["instance_count"] or 1)
        factor = min(limits.target_percent / max(judged[slow]["busy_percent"], 1.0), limits.max_scale)
        suggested = max(count + 1, math.ceil(count * factor - 1e-9))
        verdict["kind"], verdict["bottleneck"] = "bottleneck", bottleneck
        suggestion: Suggestion = {"group": bottleneck, "instance_count": suggested}
        verdict["suggestion"] = suggestion
        if prices is not None:
            busy, resource = judged[slow]["busy_percent"], judged[slow]["resource"]
            speedup = bottleneck_speedup(count, suggested, busy, limits.target_percent)
            assumption = bottleneck_assumption(slow, resource, busy, limits.target_percent, speedup)
            money = (summary_groups, prices)
            suggestion["effect"] = scaling_effect(
                bottleneck, suggested, *money, currency=currency, speedup=speedup, assumption=assumption
            )
        parts.append(
            f"{label(slow)} {_fmt(judged[slow]['busy_percent'])}% busy while {label(bottleneck)} are at "
            f"{_fmt(b['busy_percent'])}%: {bottleneck} is the bottleneck; try {suggested} {bottleneck} instances"
        )
    elif bottleneck:
        verdict["kind"] = "balanced"
        parts.append(
            "Every group is busy ("
            + ", ".join(f"{label(n)} {_fmt(g['busy_percent'])}%" for n, g in judged.items())
            + "): no group waits on another"
        )
    else:
        busiest = max(judged, key=lambda n: judged[n]["busy_percent"])
        verdict["kind"] = "not_saturated"
        parts.append(
            f"No group is saturated (busiest: {label(busiest)} at {_fmt(judged[busiest]['busy_percent'])}%): the job "
            "waits on something outside the instances' CPUs and GPUs (input I/O, network, the script's own pauses)"
        )
    for name, g in judged.items():
        count = int(g["instance_count"] or 1)
        if name == bottleneck or count < 2 or g["busy_percent"] >= limits.over_provisioned_percent:
            continue
        fewer = max(1, math.ceil(count * g["busy_percent"] / limits.target_percent))
        if fewer < count:
            g.update(over_provisioned=True, suggested_count=fewer)
            g.update(_fewer_effect(name, fewer, summary_groups, prices, currency))
            verdict["over_provisioned_groups"].append(name)
            parts.append(
                f"{name} is over-provisioned: {_fmt(g['busy_percent'])}% busy; "
                f"{fewer} instance{'s' if fewer > 1 else ''} would do"
            )
    idle = [n for n in verdict["idle_groups"] if n not in verdict["over_provisioned_groups"]]
    if idle:
        parts.append("idle: " + ", ".join(f"{label(n)} at {_fmt(judged[n]['busy_percent'])}%" for n in idle))
    verdict["message"] = "; ".join(parts)
    verdict["groups"] = _compact(groups)
    return verdict


def _fewer_effect(
    name: str, fewer: int, groups: Mapping[str, GroupSummary], prices: Mapping[str, Price] | None, currency: str
) -> dict[str, SuggestionEffect]:
    """``{"effect": ...}`` of running an over-provisioned group with ``fewer`` instances ({} without prices)."""
    if prices is None:
        return {}
    plural = "s" if fewer > 1 else ""
    verb = "do" if fewer > 1 else "does"
    assumption = f"if {fewer} {name} instance{plural} {verb} its work: not the bottleneck, so the run's length stays"
    return {"effect": scaling_effect(name, fewer, groups, prices, currency=currency, assumption=assumption)}


def _compact(groups: Mapping[str, Mapping[str, Any]]) -> dict[str, GroupVerdict]:
    """Leave out a group's empty fields (None, ``over_provisioned: false``, the note already in
    ``notes``): the verdict travels inside the size-bounded summary.

    The cast names what :func:`_assess` built in this module (a builder, not a reader: the keys of
    a TypedDict cannot be filtered by a computed name without one)."""
    return {
        name: cast(
            "GroupVerdict",
            {k: v for k, v in g.items() if v is not None and k != "note" and not (k == "over_provisioned" and not v)},
        )
        for name, g in groups.items()
    }


def state_label(judged: Mapping[str, Any]) -> str:
    """A group's state as the verdict words it: with the instance count it suggests when the group is
    over-provisioned (``idle (try 1 instance)``)."""
    state = str(judged.get("state"))
    count = judged.get("suggested_count")
    if judged.get("over_provisioned") and count:
        return f"{state} (try {count} instance{'' if count == 1 else 's'})"
    return state


def format_verdict(verdict: Verdict | VerdictHeadline) -> str:
    """The verdict for the task log: the message, then instance time per group and what waited.

    A verdict the size bound cut to its headline has no groups and no notes.
    """
    lines = [f"Verdict: {verdict.get('message') or '-'}"]
    full: Verdict | None = None
    if "groups" in verdict:
        full = verdict
    for name, g in (full["groups"] if full else {}).items():
        busy, seconds = g.get("busy_percent"), g.get("instance_seconds")
        share = g.get("waiting_share")
        lines.append(
            f"  {name}: "
            + (
                f"{_NAMES.get(g.get('resource') or '', '?')} {_fmt(busy)}% busy "
                f"(peak {_fmt(g.get('peak_percent') or 0)}%), "
                if busy is not None
                else "no datapoints, "
            )
            + (f"{seconds:g} instance-seconds" if seconds is not None else "instance-seconds unknown")
            + (f", waiting {share:.0%} of the time" if share is not None else "")
            + _spot_part(seconds, g.get("spot_saved_instance_seconds"))
            + f" [{state_label(g)}]"
        )
    waiting = _waiting_line(verdict)
    if waiting:
        lines.append(waiting)
    suggestion = verdict.get("suggestion")
    if suggestion and "effect" in suggestion:
        lines.append(effect_line(suggestion["group"], suggestion["effect"]))
    for name, g in (full["groups"] if full else {}).items():
        if "effect" in g:
            lines.append(effect_line(name, g["effect"]))
    lines.extend(f"  note: {note}" for note in (full["notes"] if full else ()))
    return "\n".join(lines)


def _spot_part(billed: float | None, saved: float | None) -> str:
    """``, spot saved 700 instance-seconds (70%)`` for a managed spot group, else nothing."""
    if saved is None:
        return ""
    share = f" ({saved / (billed + saved):.0%})" if billed is not None and billed + saved > 0 else ""
    return f", spot saved {saved:g} instance-seconds{share}"


def _waiting_line(verdict: Verdict | VerdictHeadline) -> str | None:
    """The instance time spent waiting: of how many instance-seconds, or (a headline keeps only the
    share) the share alone; None when not known."""
    share = verdict.get("waiting_share")
    if share is None:
        return None
    if "groups" in verdict:
        waited, total = verdict["waiting_instance_seconds"], verdict["instance_seconds"]
        if waited is not None and total is not None:
            return f"  instance time spent waiting: {waited:g} of {total:g} instance-seconds ({share:.0%})"
    return f"  instance time spent waiting: {share:.0%}"


def _signed(value: float, currency: str) -> str:
    """A change in money with its sign (:func:`~airflow_hetero.amounts.format_amount`): ``-0.000021 USD``."""
    return f"{format_amount(value, signed=True)} {currency}"


def effect_line(group: str, effect: SuggestionEffect) -> str:
    """A suggestion's effect for the task log: money per hour and per run, the run's length, the model."""
    head = f"  if {group} has {effect['suggested_count']} instead of {effect['instance_count']} instances: "
    money = []
    if effect["per_hour"] is not None:
        money.append(f"{_signed(effect['per_hour'], effect['currency'])}/h")
    if effect["per_run"] is not None:
        money.append(f"{_signed(effect['per_run'], effect['currency'])} per run")
    run, after = effect.get("run_seconds"), effect.get("run_seconds_after")
    length = f"run {run:g} s -> {after:g} s" if run is not None and after is not None and run != after else ""
    parts = [", ".join(money) or "cost unknown", length, effect["assumption"]]
    if "reason" in effect:
        parts.append(f"({effect['reason']})")
    return head + "; ".join(p for p in parts if p)
