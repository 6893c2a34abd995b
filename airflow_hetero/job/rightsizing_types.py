"""Which instance type a right-sized group moves to, when its count is at a bound (pure; docs/rightsizing.md).

A group's ``GroupBounds.types`` lists the types it may run on. Counts move first; a type moves only where a
count cannot, one type at a time, and only in the direction of the objective:

* ``objective="cost"``: a group at its ``min_count`` whose primary resource is its CPUs, not the bottleneck and
  below the verdict's ``over_provisioned_percent`` in each agreeing run, moves to a *smaller* type: the largest
  of the listed types with fewer vCPUs, the same GPUs and a lower price, on which the load it showed (scaled by
  the vCPUs; the highest of the agreeing runs) stays within the verdict's ``target_percent``;
* ``objective="time"``: a bottleneck group at its ``max_count`` moves to a *larger* type: the smallest of the
  listed types with more of the resource it is short of (vCPUs or GPUs) and no less of the other.

A type counted undone before, a type without vCPU/GPU figures or without a price is never chosen; a group's own
type is always one of its types, and a type moved to that its types no longer list goes back to the one written
(:func:`written_back`). The instance facts: vCPUs and GPUs from SageMaker's facts
(:func:`instance_facts`, :func:`airflow_hetero.sagemaker_facts.capacity`) or the summary's ``capacity_overrides``
(:func:`seen_facts`), prices from the operator's price settings and the Price List (given by the caller).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_hetero.sagemaker_facts import capacity

if TYPE_CHECKING:
    from airflow_hetero.definition.rightsizing import GroupFacts, RightSizing

__all__ = [
    "TypeStep",
    "carried_types",
    "instance_facts",
    "next_type",
    "seen_facts",
    "small_in",
    "type_inputs",
    "written_back",
]


@dataclass(frozen=True)
class TypeStep:
    """The type a group would move to (None: none fits, ``why`` says why), and the figures behind it."""

    to: str | None
    why: str
    figures: dict[str, Any]


def _size(facts: Mapping[str, Mapping[str, Any]], kind: str) -> tuple[int, int] | None:
    """(vCPUs, GPUs) of ``kind``; None when either is unknown."""
    entry = facts.get(kind) or {}
    cpus, gpus = entry.get("cpus"), entry.get("gpus")
    return (cpus, gpus) if isinstance(cpus, int) and isinstance(gpus, int) else None


def small_in(record: Mapping[str, Any], group: str) -> bool:
    """Whether one run found ``group`` small enough for a smaller type: its CPUs its primary resource, not the
    bottleneck, below the verdict's ``over_provisioned_percent`` (a record without that threshold: never)."""
    seen = (record.get("groups") or {}).get(group) or {}
    verdict = record.get("verdict") or {}
    limit, busy = verdict.get("over_provisioned_percent"), seen.get("busy_percent")
    if verdict.get("bottleneck") == group or seen.get("resource") != "cpu":
        return False
    return isinstance(limit, int | float) and isinstance(busy, int | float) and busy < limit


def next_type(
    direction: str,
    current: str,
    allowed: Sequence[str],
    *,
    facts: Mapping[str, Mapping[str, Any]],
    prices: Mapping[str, float],
    blocked: Sequence[int | str],
    busy: float | None,
    resource: str | None,
    target: float,
) -> TypeStep:
    """One step from ``current`` to a ``smaller`` or ``larger`` type of ``allowed`` (see the module docstring);
    ``busy``: the group's primary resource in % in the latest run, ``resource``: ``cpu`` or ``gpu``."""
    size, price = _size(facts, current), prices.get(current)
    if size is None or price is None:
        return TypeStep(None, f"{current} has no vCPU/GPU figures or no price to weigh a move by", {})
    others = [t for t in dict.fromkeys(allowed) if t != current]
    unknown = [t for t in others if _size(facts, t) is None or t not in prices]
    tried = [t for t in others if t in blocked]
    usable = [t for t in others if t not in unknown and t not in tried]
    if direction == "smaller":
        step = _smaller(current, size, price=price, usable=usable, facts=facts, prices=prices, busy=busy, target=target)
    else:
        step = _larger(current, size, usable, facts, resource)
    notes = [f"{', '.join(tried)} tried and undone"] if tried else []
    notes += [f"{', '.join(unknown)} without figures or price"] if unknown else []
    if step.to is None and notes:
        return TypeStep(None, f"{step.why} ({'; '.join(notes)})", step.figures)
    return step


def _smaller(
    current: str,
    size: tuple[int, int],
    *,
    price: float,
    usable: Sequence[str],
    facts: Mapping[str, Mapping[str, Any]],
    prices: Mapping[str, float],
    busy: float | None,
    target: float,
) -> TypeStep:
    if busy is None:
        return TypeStep(None, "no utilisation to size a smaller type by", {})
    cheaper = [t for t in usable if (s := _size(facts, t)) and s[1] == size[1] and s[0] < size[0] and prices[t] < price]
    if not cheaper:
        return TypeStep(None, f"no cheaper type in types with fewer vCPUs and the same GPUs as {current}", {})
    kind = max(cheaper, key=lambda t: (_cpus(facts, t), -prices[t]))  # one step: the nearest size down
    after = busy * size[0] / _cpus(facts, kind)
    figures = {
        "vcpus": size[0],
        "vcpus_after": _cpus(facts, kind),
        "busy_percent": busy,
        "busy_percent_after": round(after, 1),
        "target_percent": target,
        "price_per_hour": price,
        "price_per_hour_after": prices[kind],
    }
    if after > target:
        return TypeStep(None, f"on {kind} its load would be {after:.3g}% > target {target:g}%", figures)
    return TypeStep(
        kind, f"{current} -> {kind}: {busy:g}% of {size[0]} vCPUs is {after:.3g}% of {figures['vcpus_after']}", figures
    )


def _larger(
    current: str,
    size: tuple[int, int],
    usable: Sequence[str],
    facts: Mapping[str, Mapping[str, Any]],
    resource: str | None,
) -> TypeStep:
    if resource not in ("cpu", "gpu"):
        return TypeStep(None, "the resource it is short of is not known", {})
    short = 0 if resource == "cpu" else 1
    larger = [
        t for t in usable if (s := _size(facts, t)) and s[short] > size[short] and s[1 - short] >= size[1 - short]
    ]
    names = "vCPUs" if resource == "cpu" else "GPUs"
    if not larger:
        return TypeStep(None, f"no type in types with more {names} than {current}", {})
    kind = min(larger, key=lambda t: (_size(facts, t) or size)[short])  # one step: the nearest size up
    bigger = _size(facts, kind) or size
    figures = {names.lower(): size[short], f"{names.lower()}_after": bigger[short]}
    return TypeStep(kind, f"{current} -> {kind}: {size[short]} -> {bigger[short]} {names}", figures)


def _cpus(facts: Mapping[str, Mapping[str, Any]], kind: str) -> int:
    return int((facts.get(kind) or {}).get("cpus") or 0)


def carried_types(
    previous: Mapping[str, Any] | None, fingerprint: str, written: Mapping[str, str], mode: str
) -> dict[str, str]:
    """The types the managed groups would run: as written, or in ``apply`` mode with the same definition, the
    types the previous decision chose."""
    types = dict(written)
    if previous is not None and mode == "apply" and previous.get("fingerprint") == fingerprint:
        chosen = previous.get("types")
        if isinstance(chosen, Mapping):
            types.update({str(g): str(t) for g, t in chosen.items() if g in written})
    return types


def seen_facts(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Instance type -> the vCPUs and GPUs the runs' summaries divided utilisation by (their ``capacity_overrides``
    included; the latest run's), as the records carry them (a group's ``devices``)."""
    seen: dict[str, dict[str, Any]] = {}
    for record in records:
        for g in (record.get("groups") or {}).values():
            if isinstance(g.get("type"), str) and isinstance(g.get("devices"), Mapping):
                seen[g["type"]] = dict(g["devices"])
    return seen


def written_back(
    types: dict[str, str], allowed: Mapping[str, Sequence[str]], written: Mapping[str, str]
) -> dict[str, str]:
    """Put back (in ``types``) the written type of each group whose type, carried from an earlier move, its
    bounds' ``types`` (``allowed``) no longer list; group -> what was done."""
    notes = {}
    for group, kind in list(types.items()):
        own = written.get(group)
        if own is not None and kind != own and kind not in allowed.get(group, []):
            types[group] = own
            notes[group] = f"{kind} is not in its types: back to {own} as written"
    return notes


def instance_facts(types: list[str]) -> dict[str, dict[str, int | None]]:
    """Instance type -> ``{"cpus": n, "gpus": n}`` (None where SageMaker's facts do not know)."""
    return {t: {"cpus": c.cpus, "gpus": c.gpus} for t in types for c in (capacity(t),)}


def type_inputs(
    policy: RightSizing, groups: Mapping[str, GroupFacts], previous: Mapping[str, Any] | None, fingerprint: str
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int | None]]]:
    """(the managed groups' types as written, the types the next run would use, the facts of every type the
    groups run or may move to)."""
    written = {g: groups[g].instance_type for g in policy.groups}
    types = carried_types(previous, fingerprint, written, policy.mode)
    listed = {t for b in policy.groups.values() for t in b.types or []}
    every = sorted({f.instance_type for f in groups.values()} | set(types.values()) | listed)
    return written, types, instance_facts(every)
