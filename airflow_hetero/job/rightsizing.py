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

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_hetero.definition.rightsizing import RightSizing
from airflow_hetero.job.rightsizing_decision import ACTIONS, Decision, GroupDecision, next_run_lines
from airflow_hetero.job.rightsizing_evidence import (
    as_map,
    new_definition,
    record_of_summary,
    signal_of,
    usable_evidence,
)
from airflow_hetero.job.rightsizing_rules import Context, judge, undo
from airflow_hetero.job.rightsizing_types import seen_facts, written_back

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
    ctx = Context(
        policy,
        {g: min(max(int(counts[g]), b.min_count), b.max_count) for g, b in policy.groups.items()},
        prices or {},
        max_cost,
        {g: list(v) for g, v in (blocked or {}).items()} if not new_definition(records, fingerprint) else {},
        {g: str(t) for g, t in (types or {}).items() if g in policy.groups},
        {**(facts or {}), **seen_facts(records)},
    )
    notes = written_back(ctx.types, {g: b.types or [] for g, b in policy.groups.items()}, written_types or {})
    decided: list[GroupDecision] = []
    for group in policy.groups:
        decision = undo(ctx, group, kept) or judge(ctx, group, kept)
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
    types = {g: str(t) for g, t in (written_types or as_map(state.get("written_types"))).items() if g in counts}
    if policy.mode == "apply":
        counts.update({g: int(n) for g, n in as_map(state.get("counts")).items() if g in counts})
        types.update({g: str(t) for g, t in as_map(state.get("types")).items() if g in types})
    budget = state.get("max_cost") if max_cost is None else max_cost
    return decide(
        policy,
        counts,
        list(state.get("history") or []),
        fingerprint=None,
        prices=dict(as_map(state.get("prices"))),
        max_cost=float(budget) if isinstance(budget, int | float) else None,
        blocked={g: list(v) for g, v in as_map(state.get("blocked")).items()},
        types=types or None,
        facts={str(t): dict(as_map(f)) for t, f in as_map(state.get("facts")).items()},
        written_types={g: str(t) for g, t in (written_types or as_map(state.get("written_types"))).items()},
    )
