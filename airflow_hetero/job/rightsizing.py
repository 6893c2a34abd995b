"""Right-sizing decisions from the evidence of earlier runs (pure; docs/rightsizing.md).

A *record* is what one completed run's summary saw (:func:`record_of_summary`): its outcome, whether it ran
on a fallback cluster, the definition's fingerprint, each group's type and count, the run's length and
cost, and the verdict (which group held the job back and what it suggested, which groups were
over-provisioned). :func:`decide` reads the records of the latest runs, oldest first, and says per managed
group what the next run should run:

* a run that failed or was stopped, ran on a fallback cluster, or came from another definition (its
  fingerprint differs) *resets* the evidence: it and every record before it are dropped;
* each remaining record is a *signal* per group: ``grow`` (the verdict's bottleneck, with its suggested
  count), ``shrink`` (over-provisioned, with the count that would do) or ``hold``;
* a group changes only when the last ``agree_runs`` records at the cluster the next run would use all say
  the same, by one *step*: toward the smallest count they suggest, at most doubling (growing) or halving
  (shrinking), at least one instance;
* the step is clipped to the group's bounds (``refused_bound`` when nothing is left of it), priced against
  ``max_cost`` (``refused_budget``: the new cluster's price per hour times the last run's length), and with
  the ``cost`` objective a growth must not raise the cost of a run (the run shortened as the verdict's model
  says: the waiting group's utilisation grows in proportion to the bottleneck's count, up to the target);
* the first run after a change that got slower, or dearer without getting faster (beyond ``tolerance``), is
  *undone*: the group goes back and the count it was moved to is not tried again while the definition stays;
* at most one group changes per run, so each run's difference has one cause.

A :class:`Decision` is plain JSON (:meth:`Decision.as_dict`): what the task log, XCom, the Instance groups
view and ``airflow-hetero render`` show.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from airflow_hetero.definition.rightsizing import RightSizing
from airflow_hetero.job.rightsizing_types import next_type, seen_facts, small_in, written_back

__all__ = [
    "ACTIONS",
    "Decision",
    "GroupDecision",
    "decide",
    "decide_again",
    "next_run_lines",
    "record_of_summary",
    "signal_of",
]

Action = Literal["kept", "changed", "undone", "refused_bound", "refused_budget"]
#: Every action a group decision may take.
ACTIONS: tuple[Action, ...] = ("kept", "changed", "undone", "refused_bound", "refused_budget")
_HOUR = 3600.0
#: The verdict's target utilisation when a record does not carry its thresholds (its default).
DEFAULT_TARGET_PERCENT = 75.0


@dataclass
class GroupDecision:
    """One managed group's decision: its count now and next, why, and the figures behind it."""

    group: str
    action: Action
    count: int
    next_count: int
    reason: str
    signals: list[str] = field(default_factory=list)  # the latest records' signals, oldest first
    figures: dict[str, Any] = field(default_factory=dict)
    type: str | None = None  # the group's instance type now (None: types not followed)
    next_type: str | None = None  # and next: another only when the decision moves the group's type

    @property
    def moves(self) -> bool:
        """Whether the decision changes the group's count or its type."""
        return self.next_count != self.count or self.next_type != self.type

    @property
    def target(self) -> str:
        """What the group would go to: its next count, or its next type."""
        return str(self.next_type) if self.next_type != self.type else str(self.next_count)

    def line(self) -> str:
        """The decision as one line of the task log."""
        move = f"{self.count} -> {self.next_count}" if self.next_count != self.count else f"{self.count}"
        if self.next_type is not None and self.next_type != self.type:
            move = f"{self.count} x {self.type} -> {self.count} x {self.next_type}"
        numbers = ", ".join(f"{k}={_short(v)}" for k, v in self.figures.items())
        return f"{self.group}: {self.action} ({move}): {self.reason}" + (f" [{numbers}]" if numbers else "")


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


@dataclass
class Decision:
    """The decision for one run: per group, the counts this run uses and the counts recommended, the
    evidence kept (``history``) and the counts that were undone (``blocked``)."""

    mode: str
    objective: str
    fingerprint: str | None
    counts: dict[str, int]  # what this run uses (apply: the decided counts; recommend: the definition's)
    recommended: dict[str, int]  # what the decision says the managed groups should run
    groups: list[GroupDecision]
    evidence: int  # records the decision rests on
    reset: str | None  # why earlier evidence was dropped, if it was
    history: list[dict[str, Any]]
    blocked: dict[str, list[int | str]]  # counts and types undone
    run_id: str | None = None
    types: dict[str, str] = field(default_factory=dict)  # the managed groups' types this run uses
    recommended_types: dict[str, str] = field(default_factory=dict)  # and those the decision recommends

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The decision for the task log: a head line, then one line per group."""
        head = f"Right-sizing ({self.mode}, objective {self.objective}): {self.evidence} run(s) of evidence" + (
            f"; evidence reset: {self.reset}" if self.reset else ""
        )
        return [head, *(f"  {g.line()}" for g in self.groups)]


def next_run_lines(state: Mapping[str, Any]) -> list[str]:
    """A decision kept as plain JSON (XCom), as the task log and the Instance groups view say it: what the
    next run uses, then one line per group."""
    counts = _cluster(state.get("counts"), state.get("types"), state.get("written_types"))
    recommended = _cluster(state.get("recommended"), state.get("recommended_types"), state.get("written_types"))
    head = f"Right-sizing ({state.get('mode')}, objective {state.get('objective')}): the next run uses {counts}"
    if recommended != counts:
        head += f"; recommended: {recommended}"
    lines = [head + f" ({state.get('evidence')} run(s) of evidence)"]
    if state.get("reset"):
        lines.append(f"  evidence reset: {state['reset']}")
    for g in state.get("groups") or []:
        decision = GroupDecision(**{k: g[k] for k in ("group", "action", "count", "next_count", "reason")})
        decision.figures = dict(g.get("figures") or {})
        decision.type, decision.next_type = g.get("type"), g.get("next_type")
        lines.append(f"  {decision.line()}")
    return lines


def _cluster(counts: Any, types: Any, written: Any) -> str:
    """``group=count``, with `` x type`` for a group whose type is not the one written."""
    kinds, as_written = _map(types), _map(written)
    return ", ".join(
        f"{g}={n}" + (f" x {kinds[g]}" if g in kinds and kinds[g] != as_written.get(g) else "")
        for g, n in _map(counts).items()
    )


def record_of_summary(
    summary: Mapping[str, Any], decision: Mapping[str, Any] | None, run_id: str | None
) -> dict[str, Any]:
    """The record of one run: what its summary (a ``HeteroLogSummaryOperator`` return value, plain JSON)
    and the run's own decision (its fingerprint and the counts it asked for) say."""
    verdict, cost, raw_groups = _map(summary.get("verdict")), _map(summary.get("cost")), _map(summary.get("groups"))
    judged = _map(verdict.get("groups"))
    groups: dict[str, dict[str, Any]] = {}
    for name, g in raw_groups.items():
        group = _map(g)
        entry: dict[str, Any] = {"type": group.get("instance_type"), "count": group.get("instance_count")}
        seen = _map(judged.get(name))
        for key in ("state", "busy_percent", "resource", "suggested_count", "over_provisioned"):
            if seen.get(key) is not None:
                entry[key] = seen[key]
        devices = _map(group.get("devices"))  # the figures the summary divided by (its capacity_overrides too)
        if isinstance(devices.get("cpus"), int) and isinstance(devices.get("gpus"), int):
            entry["devices"] = {"cpus": devices["cpus"], "gpus": devices["gpus"]}
        groups[name] = entry
    mine = _map(decision)
    asked = dict(_map(mine.get("counts")))
    asked_types = dict(_map(mine.get("types")))
    suggestion = _map(verdict.get("suggestion"))
    # the training window's length (to the fraction of a second: billable seconds are whole) is the run's
    seconds = _map(summary.get("training_window")).get("seconds")
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
            "target_percent": _map(verdict.get("thresholds")).get("target_percent"),
            "over_provisioned_percent": _map(verdict.get("thresholds")).get("over_provisioned_percent"),
        },
        "groups": groups,
    }


def _map(value: Any) -> Mapping[str, Any]:
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


def _new_definition(records: Sequence[Mapping[str, Any]], fingerprint: str | None) -> bool:
    """Whether a record came from another definition: only then are the counts and types undone forgotten."""
    return fingerprint is not None and any(r.get("fingerprint") != fingerprint for r in records)


def _count_in(record: Mapping[str, Any], group: str) -> int | None:
    value = ((record.get("groups") or {}).get(group) or {}).get("count")
    return value if isinstance(value, int) else None


def _type_in(record: Mapping[str, Any], group: str) -> str | None:
    value = ((record.get("groups") or {}).get(group) or {}).get("type")
    return value if isinstance(value, str) else None


def _busy_in(record: Mapping[str, Any], group: str) -> Any:
    return ((record.get("groups") or {}).get(group) or {}).get("busy_percent")


def _at_cluster(
    records: Sequence[Mapping[str, Any]], counts: Mapping[str, int], types: Mapping[str, str]
) -> list[Mapping[str, Any]]:
    """The newest records run at ``counts`` and ``types`` (every managed group), consecutive, oldest first."""
    streak: list[Mapping[str, Any]] = []
    for record in reversed(records):
        if any(_count_in(record, g) != n for g, n in counts.items()):
            break
        if any(_type_in(record, g) not in (None, t) for g, t in types.items()):
            break
        streak.append(record)
    return streak[::-1]


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
class _Context:
    policy: RightSizing
    counts: dict[str, int]
    prices: Mapping[str, float]
    max_cost: float | None
    blocked: dict[str, list[int | str]]
    types: dict[str, str] = field(default_factory=dict)
    facts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _change(new: Mapping[str, Any], old: Mapping[str, Any], group: str) -> tuple[Any, Any] | None:
    """(before, now) of ``group``'s one change between two runs, its count or its type; None for no change, both."""
    counts = _count_in(old, group), _count_in(new, group)
    types = _type_in(old, group), _type_in(new, group)
    count_moved = counts[0] != counts[1]
    type_moved = None not in types and types[0] != types[1]
    if None in counts or count_moved == type_moved:
        return None
    return counts if count_moved else types


def _undo(ctx: _Context, group: str, records: Sequence[Mapping[str, Any]]) -> GroupDecision | None:
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
    if any(_count_in(new, g) != _count_in(old, g) or _type_in(new, g) != _type_in(old, g) for g in others):
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


def _priced(ctx: _Context, group: str, after: int, last: Mapping[str, Any], grow: bool) -> GroupDecision | None:
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
            f"{after} instances could cost {worst:.4g} > max_cost",
            figures=figures,
        )
    if grow and ctx.policy.objective == "cost" and cost_after > cost_now * (1 + ctx.policy.tolerance):
        why = f"{after} instances would make a run cost more ({cost_now:.4g} -> {cost_after:.4g}): objective cost"
        return GroupDecision(group, "kept", count, count, why, figures=figures)
    return GroupDecision(group, "changed", count, after, "", figures=figures)


def _type_move(
    ctx: _Context, direction: str, streak: Sequence[Mapping[str, Any]], base: GroupDecision
) -> GroupDecision:
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
    loads = [b for r in streak[-policy.agree_runs :] if isinstance(b := _busy_in(r, group), int | float)]
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
    said = "found it under-used; min_count" if want == "smaller" else "say grow; max_count"
    why = f"the last {policy.agree_runs} runs {said} is {count}: a {want} type ({step.why})"
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
        over = f"{step.to} could cost {worst:.4g} > max_cost"
        return GroupDecision(group, "refused_budget", count, count, over, base.signals, base.figures, current, current)
    return GroupDecision(group, "changed", count, count, why, base.signals, base.figures, current, step.to)


def _judge(ctx: _Context, group: str, records: Sequence[Mapping[str, Any]]) -> GroupDecision:
    """The decision for one group without an undo: hysteresis, step, bounds, blocked counts, prices."""
    policy, count = ctx.policy, ctx.counts[group]
    bounds = policy.groups[group]
    streak = _at_cluster(records, ctx.counts, ctx.types)
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
        why = f"the last {policy.agree_runs} runs say {direction}{clipped}"
        return GroupDecision(group, "changed", count, after, why, words, verdict.figures if verdict else {})
    verdict.signals = words
    return verdict


def decide(
    policy: RightSizing,
    counts: Mapping[str, int],
    records: Sequence[Mapping[str, Any]],
    *,
    fingerprint: str | None,
    prices: Mapping[str, float] | None = None,
    max_cost: float | None = None,
    blocked: Mapping[str, Sequence[int | str]] | None = None,
    reset: str | None = None,
    types: Mapping[str, str] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
    written_types: Mapping[str, str] | None = None,
) -> Decision:
    """The decision for the next run of a job whose managed groups would run ``counts`` (each within its
    bounds), from ``records`` of earlier runs, oldest first. ``prices``: instance type -> price per
    instance-hour (weighs the objective and ``max_cost``); ``blocked``: counts and types undone before;
    ``reset``: why the caller dropped evidence itself (a run that left no record); ``types``: the managed
    groups' instance types the next run would use (None: types do not move); ``facts``: instance type ->
    ``{"cpus": n, "gpus": n}`` (weighs a move between ``GroupBounds.types``; the figures a record's summary
    used, its ``capacity_overrides`` included, take precedence); ``written_types``: the types as
    written, which a group goes back to when the type it was moved to is no longer in its ``types``."""
    kept, why = usable_evidence(records, fingerprint)
    kept = kept[-policy.history :]
    ctx = _Context(
        policy,
        {g: min(max(int(counts[g]), b.min_count), b.max_count) for g, b in policy.groups.items()},
        prices or {},
        max_cost,
        {g: list(v) for g, v in (blocked or {}).items()} if not _new_definition(records, fingerprint) else {},
        {g: str(t) for g, t in (types or {}).items() if g in policy.groups},
        {**(facts or {}), **seen_facts(records)},
    )
    notes = written_back(ctx.types, {g: b.types or [] for g, b in policy.groups.items()}, written_types or {})
    decided: list[GroupDecision] = []
    for group in policy.groups:
        decision = _undo(ctx, group, kept) or _judge(ctx, group, kept)
        if group in notes:
            decision.reason = f"{notes[group]}; {decision.reason}"
        if decision.type is None and group in ctx.types:
            decision.type = decision.next_type = ctx.types[group]
        decided.append(decision)
    moving = sorted((d for d in decided if d.moves), key=lambda d: d.action != "undone")
    for later in moving[1:]:  # one change per run: the undo first, then the policy's order
        first = moving[0]
        later.reason = f"would go to {later.target}; one change per run ({first.group} changes first)"
        later.action, later.next_count, later.next_type = "kept", later.count, later.type
    recommended = {d.group: d.next_count for d in decided}
    recommended_types = {d.group: d.next_type for d in decided if d.next_type is not None}
    applied = recommended if policy.mode == "apply" else dict(ctx.counts)
    return Decision(
        mode=policy.mode,
        objective=policy.objective,
        fingerprint=fingerprint,
        counts=applied,
        recommended=recommended,
        groups=decided,
        evidence=len(kept),
        reset=reset or why,
        history=kept,
        blocked=ctx.blocked,
        types=recommended_types if policy.mode == "apply" else dict(ctx.types),
        recommended_types=recommended_types,
    )


def decide_again(
    state: Mapping[str, Any],
    policy: RightSizing,
    written: Mapping[str, int],
    *,
    max_cost: float | None = None,
    written_types: Mapping[str, str] | None = None,
) -> Decision:
    """The decision for the next run from a decision kept as plain JSON (a training task's or a summary's
    ``rightsizing`` XCom: its evidence, the counts and types it chose, those it undid, its prices and instance
    facts), with ``policy`` and the job's ``written`` counts and types: what ``airflow-hetero render
    --rightsizing-history`` shows. The fingerprints were compared when the evidence was gathered; ``max_cost``
    (None: the state's) weighs it."""
    counts = {g: int(written[g]) for g in policy.groups}
    types = {g: str(t) for g, t in (written_types or _map(state.get("written_types"))).items() if g in counts}
    if policy.mode == "apply":
        counts.update({g: int(n) for g, n in _map(state.get("counts")).items() if g in counts})
        types.update({g: str(t) for g, t in _map(state.get("types")).items() if g in types})
    budget = state.get("max_cost") if max_cost is None else max_cost
    return decide(
        policy,
        counts,
        list(state.get("history") or []),
        fingerprint=None,
        prices=dict(_map(state.get("prices"))),
        max_cost=float(budget) if isinstance(budget, int | float) else None,
        blocked={g: list(v) for g, v in _map(state.get("blocked")).items()},
        types=types or None,
        facts={str(t): dict(_map(f)) for t, f in _map(state.get("facts")).items()},
        written_types={g: str(t) for g, t in (written_types or _map(state.get("written_types"))).items()},
    )
