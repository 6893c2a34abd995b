"""The evidence a right-sizing decision rests on (pure; docs/rightsizing.md): the *record* of one completed run
(:func:`record_of_summary`), what its verdict says of a group (:func:`signal_of`), which records reset the
evidence (:func:`usable_evidence`: a failed or stopped run, a fallback cluster, another definition), and the
readings of a record the count and type rules share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "as_map",
    "at_cluster",
    "busy_in",
    "count_in",
    "new_definition",
    "record_of_summary",
    "signal_of",
    "type_in",
    "usable_evidence",
]


def record_of_summary(
    summary: Mapping[str, Any], decision: Mapping[str, Any] | None, run_id: str | None
) -> dict[str, Any]:
    """The record of one run: what its summary (a ``HeteroLogSummaryOperator`` return value, plain JSON)
    and the run's own decision (its fingerprint and the counts it asked for) say."""
    verdict, cost, raw_groups = (
        as_map(summary.get("verdict")),
        as_map(summary.get("cost")),
        as_map(summary.get("groups")),
    )
    judged = as_map(verdict.get("groups"))
    groups: dict[str, dict[str, Any]] = {}
    for name, g in raw_groups.items():
        group = as_map(g)
        entry: dict[str, Any] = {"type": group.get("instance_type"), "count": group.get("instance_count")}
        seen = as_map(judged.get(name))
        for key in ("state", "busy_percent", "resource", "suggested_count", "over_provisioned"):
            if seen.get(key) is not None:
                entry[key] = seen[key]
        devices = as_map(group.get("devices"))  # the figures the summary divided by (its capacity_overrides too)
        if isinstance(devices.get("cpus"), int) and isinstance(devices.get("gpus"), int):
            entry["devices"] = {"cpus": devices["cpus"], "gpus": devices["gpus"]}
        groups[name] = entry
    mine = as_map(decision)
    asked = dict(as_map(mine.get("counts")))
    asked_types = dict(as_map(mine.get("types")))
    suggestion = as_map(verdict.get("suggestion"))
    # the training window's length (to the fraction of a second: billable seconds are whole) is the run's
    seconds = as_map(summary.get("training_window")).get("seconds")
    seconds = seconds or summary.get("training_seconds") or summary.get("billable_seconds")
    return {
        "run_id": run_id,
        "job_name": summary.get("training_job_name"),
        "outcome": str(summary.get("status") or "unknown").lower(),
        "fallback": bool(summary.get("capacity_attempts"))
        or any(groups.get(g, {}).get("count") not in (None, n) for g, n in asked.items())
        or any(groups.get(g, {}).get("type") not in (None, t) for g, t in asked_types.items()),
        "fingerprint": mine.get("fingerprint"),
        "run_seconds": float(seconds) if isinstance(seconds, int | float) else None,
        "cost": cost.get("total"),
        "currency": cost.get("currency"),
        "verdict": {
            "kind": verdict.get("kind"),
            "bottleneck": verdict.get("bottleneck"),
            "suggestion": dict(suggestion) or None,
            "target_percent": as_map(verdict.get("thresholds")).get("target_percent"),
            "over_provisioned_percent": as_map(verdict.get("thresholds")).get("over_provisioned_percent"),
        },
        "groups": groups,
    }


def as_map(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping (plain JSON read back), else ``{}``."""
    return value if isinstance(value, Mapping) else {}


def signal_of(record: Mapping[str, Any], group: str) -> tuple[str, int | None]:
    """``("grow", count)``, ``("shrink", count)`` or ``("hold", None)``: what one run's verdict says of ``group``."""
    verdict = record.get("verdict") or {}
    suggestion = verdict.get("suggestion") or {}
    if suggestion.get("group") == group and isinstance(suggestion.get("instance_count"), int):
        return "grow", int(suggestion["instance_count"])
    seen = (record.get("groups") or {}).get(group) or {}
    if seen.get("over_provisioned") and isinstance(seen.get("suggested_count"), int):
        return "shrink", int(seen["suggested_count"])
    return "hold", None


def _reset_reason(record: Mapping[str, Any], fingerprint: str | None) -> str | None:
    run = record.get("run_id") or record.get("job_name") or "a run"
    if record.get("outcome") != "completed":
        return f"{run} ended {record.get('outcome')}"
    if record.get("fallback"):
        return f"{run} ran on a fallback cluster"
    if fingerprint is not None and record.get("fingerprint") != fingerprint:
        return f"{run} came from another definition (fingerprint {record.get('fingerprint')}, now {fingerprint})"
    return None


def usable_evidence(
    records: Sequence[Mapping[str, Any]], fingerprint: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """The records after the latest one that resets the evidence, and why it did (None: none did)."""
    kept: list[dict[str, Any]] = []
    reason = None
    for record in records:
        why = _reset_reason(record, fingerprint)
        if why is not None:
            kept, reason = [], why
        else:
            kept.append(dict(record))
    return kept, reason


def new_definition(records: Sequence[Mapping[str, Any]], fingerprint: str | None) -> bool:
    """Whether a record came from another definition: only then are the counts and types undone forgotten."""
    return fingerprint is not None and any(r.get("fingerprint") != fingerprint for r in records)


def count_in(record: Mapping[str, Any], group: str) -> int | None:
    value = ((record.get("groups") or {}).get(group) or {}).get("count")
    return value if isinstance(value, int) else None


def type_in(record: Mapping[str, Any], group: str) -> str | None:
    value = ((record.get("groups") or {}).get(group) or {}).get("type")
    return value if isinstance(value, str) else None


def busy_in(record: Mapping[str, Any], group: str) -> Any:
    return ((record.get("groups") or {}).get(group) or {}).get("busy_percent")


def at_cluster(
    records: Sequence[Mapping[str, Any]], counts: Mapping[str, int], types: Mapping[str, str]
) -> list[Mapping[str, Any]]:
    """The newest records run at ``counts`` and ``types`` (every managed group), consecutive, oldest first."""
    streak: list[Mapping[str, Any]] = []
    for record in reversed(records):
        if any(count_in(record, g) != n for g, n in counts.items()):
            break
        if any(type_in(record, g) not in (None, t) for g, t in types.items()):
            break
        streak.append(record)
    return streak[::-1]
