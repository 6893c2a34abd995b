"""The rules of a right-sizing decision for one managed group (pure; docs/rightsizing.md): the undo of a change
that made the next run slower or dearer (:func:`undo`), and otherwise (:func:`judge`) hysteresis over the runs
at the cluster the next run would use, one step toward the counts they suggest, the group's bounds, the counts
and types undone before, the budget and the ``cost`` objective, and a move between ``GroupBounds.types`` at a
count bound (:mod:`.rightsizing_types`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_hetero.amounts import format_amount
from airflow_hetero.definition.rightsizing import RightSizing
from airflow_hetero.job.rightsizing_decision import Action, GroupDecision
from airflow_hetero.job.rightsizing_evidence import at_cluster, busy_in, count_in, signal_of, type_in
from airflow_hetero.job.rightsizing_types import next_type, small_in

__all__ = ["DEFAULT_TARGET_PERCENT", "Context", "judge", "undo"]

_HOUR = 3600.0
#: The verdict's target utilisation when a record does not carry its thresholds (its default).
DEFAULT_TARGET_PERCENT = 75.0


def _rate(
    record: Mapping[str, Any],
    counts: Mapping[str, int],
    prices: Mapping[str, float],
    types: Mapping[str, str] | None = None,
) -> float | None:
    """The price per hour of ``record``'s cluster with ``counts`` and ``types`` for the groups they name; None
    if unpriced."""
    total = 0.0
    for name, g in (record.get("groups") or {}).items():
        price = prices.get(str((types or {}).get(name, g.get("type"))))
        count = counts.get(name, g.get("count"))
        if price is None or not isinstance(count, int):
            return None
        total += price * count
    return total


@dataclass
class Context:
    policy: RightSizing
    counts: dict[str, int]
    prices: Mapping[str, float]
    max_cost: float | None
    blocked: dict[str, list[int | str]]
    types: dict[str, str] = field(default_factory=dict)
    facts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _change(new: Mapping[str, Any], old: Mapping[str, Any], group: str) -> tuple[Any, Any] | None:
    """(before, now) of ``group``'s one change between two runs, its count or its type; None for no change, both."""
    counts = count_in(old, group), count_in(new, group)
    types = type_in(old, group), type_in(new, group)
    count_moved = counts[0] != counts[1]
    type_moved = None not in types and types[0] != types[1]
    if None in counts or count_moved == type_moved:
        return None
    return counts if count_moved else types


def undo(ctx: Context, group: str, records: Sequence[Mapping[str, Any]]) -> GroupDecision | None:
    """The undo of ``group``'s last change (count or type), when the first run after it got slower, or dearer
    and not faster."""
    if len(records) < 2:
        return None
    new, old = records[-1], records[-2]
    change = _change(new, old, group)
    if change is None:
        return None
    before, now = change
    if before in ctx.blocked.get(group, []):
        return None  # that change was itself an undo: never back to what was undone
    if now != (ctx.types.get(group, now) if isinstance(now, str) else ctx.counts[group]):
        return None
    others = (g for g in ctx.counts if g != group)
    if any(count_in(new, g) != count_in(old, g) or type_in(new, g) != type_in(old, g) for g in others):
        return None  # another group changed too: no single cause
    tol = ctx.policy.tolerance
    t_new, t_old, c_new, c_old = new.get("run_seconds"), old.get("run_seconds"), new.get("cost"), old.get("cost")
    figures = {"run_seconds": t_new, "run_seconds_before": t_old, "cost": c_new, "cost_before": c_old}
    slower = t_new is not None and t_old is not None and t_new > t_old * (1 + tol)
    faster = t_new is not None and t_old is not None and t_new < t_old * (1 - tol)
    dearer = c_new is not None and c_old is not None and c_new > c_old * (1 + tol)
    if not slower and not (dearer and not faster):
        return None
    why = "the run got slower" if slower else "the run cost more without getting faster"
    ctx.blocked.setdefault(group, [])
    if now not in ctx.blocked[group]:
        ctx.blocked[group].append(now)
    reason = f"{why} after {before} -> {now}: back to {before}"
    count = ctx.counts[group]
    if isinstance(now, str):
        return GroupDecision(group, "undone", count, count, reason, figures=figures, type=now, next_type=before)
    return GroupDecision(group, "undone", now, before, reason, figures=figures)


def _step(direction: str, count: int, targets: Sequence[int]) -> int:
    """One step from ``count`` toward the most cautious of ``targets``: at most x2 up or /2 down, at least 1."""
    if direction == "grow":
        return max(count + 1, min(*targets, 2 * count))
    return min(count - 1, max(*targets, math.ceil(count / 2), 1))


def _speedup(record: Mapping[str, Any], group: str, count: int, after: int) -> float:
    """How much shorter the run gets when bottleneck ``group`` goes from ``count`` to ``after`` (the verdict's
    model: the waiting group's utilisation grows in proportion, up to the target; never slower)."""
    others = [
        g.get("busy_percent")
        for name, g in (record.get("groups") or {}).items()
        if name != group and isinstance(g.get("busy_percent"), int | float)
    ]
    if not others or min(others) <= 0 or count < 1:
        return 1.0
    busy = float(min(others))
    target = float((record.get("verdict") or {}).get("target_percent") or DEFAULT_TARGET_PERCENT)
    return max(1.0, min(target, busy * after / count) / busy)


def _priced(ctx: Context, group: str, after: int, last: Mapping[str, Any], grow: bool) -> GroupDecision | None:
    """A refusal of ``group`` going to ``after`` by the budget or (objective cost) by the price of a run."""
    count = ctx.counts[group]
    rate_now = _rate(last, ctx.counts, ctx.prices, ctx.types)
    rate_after = _rate(last, {**ctx.counts, group: after}, ctx.prices, ctx.types)
    seconds = last.get("run_seconds")
    if rate_after is None or rate_now is None or not isinstance(seconds, int | float):
        if ctx.max_cost is not None or (grow and ctx.policy.objective == "cost"):
            why = "no price or run length to weigh it by"
            kind: Action = "refused_budget" if ctx.max_cost is not None else "kept"
            return GroupDecision(group, kind, count, count, f"would go to {after}, but {why}")
        return None
    shorter = _speedup(last, group, count, after) if grow else 1.0
    cost_now, cost_after = rate_now * seconds / _HOUR, rate_after * seconds / shorter / _HOUR
    worst = rate_after * seconds / _HOUR  # the budget assumes the run gets no shorter
    figures = {"cost_per_run": round(cost_now, 6), "cost_per_run_after": round(cost_after, 6)}
    figures["run_seconds"], figures["run_seconds_after"] = seconds, round(seconds / shorter, 1)
    if ctx.max_cost is not None and worst > ctx.max_cost:
        figures["max_cost"], figures["worst_case"] = ctx.max_cost, round(worst, 6)
        return GroupDecision(
            group,
            "refused_budget",
            count,
            count,
            f"{after} instances could cost {format_amount(worst)} > max_cost",
            figures=figures,
        )
    if grow and ctx.policy.objective == "cost" and cost_after > cost_now * (1 + ctx.policy.tolerance):
        why = (
            f"{after} instances would make a run cost more ({format_amount(cost_now)} -> {format_amount(cost_after)}):"
            " objective cost"
        )
        return GroupDecision(group, "kept", count, count, why, figures=figures)
    return GroupDecision(group, "changed", count, after, "", figures=figures)


def _type_move(ctx: Context, direction: str, streak: Sequence[Mapping[str, Any]], base: GroupDecision) -> GroupDecision:
    """``base`` (a group's count kept at its bound), or the move of its type the objective allows there: cost,
    a smaller type at ``min_count``; time, a larger one at ``max_count`` (:mod:`.rightsizing_types`)."""
    group, count, current = base.group, base.count, ctx.types.get(base.group)
    bounds, policy = ctx.policy.groups[group], ctx.policy
    want, objective = ("smaller", "cost") if direction == "shrink" else ("larger", "time")
    if current is None or len(set(bounds.types or []) | {current}) < 2 or policy.objective != objective:
        return base
    if want == "smaller" and not all(small_in(r, group) for r in streak[-policy.agree_runs :]):
        return base
    last = streak[-1]
    seen = (last.get("groups") or {}).get(group) or {}
    loads = [b for r in streak[-policy.agree_runs :] if isinstance(b := busy_in(r, group), int | float)]
    step = next_type(
        want,
        current,
        bounds.types or [],
        facts=ctx.facts,
        prices=ctx.prices,
        blocked=ctx.blocked.get(group, []),
        busy=max(loads) if want == "smaller" and loads else seen.get("busy_percent"),  # the most cautious
        resource=seen.get("resource"),
        target=float((last.get("verdict") or {}).get("target_percent") or DEFAULT_TARGET_PERCENT),
    )
    base.figures = {**base.figures, **step.figures}
    if step.to is None:
        base.reason += f"; no {want} type: {step.why}"
        return base
    rate_now = _rate(last, ctx.counts, ctx.prices, ctx.types)
    rate_after = _rate(last, ctx.counts, ctx.prices, {**ctx.types, group: step.to})
    seconds = last.get("run_seconds")
    said = "found it under-used; min_count" if want == "smaller" else f"{_say(policy.agree_runs)} grow; max_count"
    why = f"{_the_last(policy.agree_runs)} {said} is {count}: a {want} type ({step.why})"
    if rate_now is None or rate_after is None or not isinstance(seconds, int | float):
        if ctx.max_cost is None:  # the type itself is priced (next_type); the cluster only weighs max_cost
            return GroupDecision(group, "changed", count, count, why, base.signals, base.figures, current, step.to)
        base.reason += f"; would move to {step.to}, but no price or run length to weigh it by"
        return GroupDecision(
            group, "refused_budget", count, count, base.reason, base.signals, base.figures, current, current
        )
    worst = rate_after * seconds / _HOUR  # the run assumed no shorter
    base.figures.update(cost_per_run=round(rate_now * seconds / _HOUR, 6), cost_per_run_after=round(worst, 6))
    if ctx.max_cost is not None and worst > ctx.max_cost:
        base.figures.update(max_cost=ctx.max_cost, worst_case=round(worst, 6))
        over = f"{step.to} could cost {format_amount(worst)} > max_cost"
        return GroupDecision(group, "refused_budget", count, count, over, base.signals, base.figures, current, current)
    return GroupDecision(group, "changed", count, count, why, base.signals, base.figures, current, step.to)


def _the_last(runs: int) -> str:
    """``the last 2 runs``, ``the last run``: the runs a change rests on (``agree_runs``)."""
    return "the last run" if runs == 1 else f"the last {runs} runs"


def _say(runs: int) -> str:
    return "says" if runs == 1 else "say"


def judge(ctx: Context, group: str, records: Sequence[Mapping[str, Any]]) -> GroupDecision:
    """The decision for one group without an undo: hysteresis, step, bounds, blocked counts, prices."""
    policy, count = ctx.policy, ctx.counts[group]
    bounds = policy.groups[group]
    streak = at_cluster(records, ctx.counts, ctx.types)
    signals = [signal_of(r, group) for r in streak[-policy.agree_runs :]]
    words = [s if n is None else f"{s}:{n}" for s, n in signals]
    if len(signals) < policy.agree_runs:
        why = f"{len(signals)} of {policy.agree_runs} runs at this cluster so far"
        return GroupDecision(group, "kept", count, count, why, words)
    directions = {s for s, _ in signals}
    if directions not in ({"grow"}, {"shrink"}):
        why = "the verdict holds it" if directions == {"hold"} else "the latest runs disagree"
        kept = GroupDecision(group, "kept", count, count, why, words)
        return (
            _type_move(ctx, "shrink", streak, kept) if count == bounds.min_count and "grow" not in directions else kept
        )
    direction = directions.pop()
    wanted = _step(direction, count, [n for _, n in signals if n is not None])
    after = min(max(wanted, bounds.min_count), bounds.max_count)
    if after == count:
        edge = "max_count" if direction == "grow" else "min_count"
        refused = GroupDecision(
            group, "refused_bound", count, count, f"would {direction} to {wanted}; {edge} is {count}", words
        )
        return _type_move(ctx, direction, streak, refused)
    if after in ctx.blocked.get(group, []):
        why = f"would {direction} to {after}, which was tried and undone"
        return GroupDecision(group, "kept", count, count, why, words)
    verdict = _priced(ctx, group, after, streak[-1], direction == "grow")
    if verdict is None or verdict.action == "changed":
        clipped = f" (bound: {wanted} wanted)" if after != wanted else ""
        why = f"{_the_last(policy.agree_runs)} {_say(policy.agree_runs)} {direction}{clipped}"
        return GroupDecision(group, "changed", count, after, why, words, verdict.figures if verdict else {})
    verdict.signals = words
    return verdict
