"""The records of right-sizing runs in XCom (docs/rightsizing.md): the evidence a run reads, a decision as
XCom keeps it, and the summary's record of its run with the decision the next run would be made with.

Run-time code of :class:`~airflow_hetero.operators.rightsizing_steps.RightSizingMixin` and of the summary
operator, kept out of the mixin's module so that a DAG parse does not load it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero.definition.rightsizing import RightSizing

__all__ = ["earlier", "evidence", "record_next", "state_of"]


def earlier(value: Any, run_id: str) -> dict[str, Any] | None:
    """An XCom value of an earlier run (a dict whose ``run_id`` is not this run's), else None."""
    if not isinstance(value, Mapping) or value.get("run_id") == run_id:
        return None
    return dict(value)


def evidence(
    previous: Mapping[str, Any] | None,
    record: Mapping[str, Any] | None,
    fingerprint: str,
    written: Mapping[str, int],
    mode: str,
) -> tuple[list[dict[str, Any]], str | None, dict[str, int], dict[str, list[int | str]]]:
    """(records, why the evidence was reset, the counts this run would use, the undone counts) from the
    previous run's decision and the summary's latest record. The record must be of the previous decision's
    run: a run whose summary did not record it (it did not run) resets the evidence."""
    if previous is None:
        return ([dict(record)] if record else []), None, dict(written), {}
    history = [dict(r) for r in previous.get("history") or []]
    reset = None
    if record is not None and record.get("run_id") == previous.get("run_id"):
        history.append(dict(record))
    else:
        history, reset = [], f"run {previous.get('run_id')} left no record (its summary task did not record it)"
    same = previous.get("fingerprint") == fingerprint
    counts = dict(written)
    if mode == "apply" and same:
        counts.update({g: int(n) for g, n in (previous.get("counts") or {}).items() if g in written})
    blocked = {g: list(v) for g, v in (previous.get("blocked") or {}).items()} if same else {}
    return history, reset, counts, blocked


def state_of(
    decision: dict[str, Any],
    policy: RightSizing,
    max_cost: float | None,
    prices: Mapping[str, float],
    written: Mapping[str, int],
    *,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A decision as XCom keeps it: with the policy, budget, prices and written counts it was made with (and
    ``extra``: the written types, the instance facts), so the summary (and ``airflow-hetero render``) can
    decide the next run's the same way."""
    return {
        **decision,
        "policy": policy.as_dict(),
        "max_cost": max_cost,
        "prices": dict(prices),
        "written": dict(written),
        **(extra or {}),
    }


def record_next(
    summary: Mapping[str, Any], decision: Mapping[str, Any], run_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the record of this run, the decision the next run would be made with) from the run's summary and the
    training task's decision: what the summary operator pushes and shows."""
    from airflow_hetero.definition.rightsizing import RightSizing
    from airflow_hetero.job.rightsizing import decide, record_of_summary
    from airflow_hetero.job.rightsizing_types import carried_types

    record = record_of_summary(summary, decision, run_id)
    policy = RightSizing.of(decision.get("policy") or {})
    written = {str(g): int(n) for g, n in (decision.get("written") or decision.get("counts") or {}).items()}
    previous = {**decision, "run_id": run_id}
    history, reset, counts, blocked = evidence(previous, record, str(decision.get("fingerprint")), written, policy.mode)
    cost: Mapping[str, Any] = summary["cost"] if isinstance(summary.get("cost"), Mapping) else {}
    priced: Mapping[str, Any] = cost["prices"] if isinstance(cost.get("prices"), Mapping) else {}
    prices = {**(decision.get("prices") or {})}
    prices.update({t: float(p["per_hour"]) for t, p in priced.items() if isinstance(p, Mapping) and p.get("per_hour")})
    max_cost = decision.get("max_cost")
    budget = float(max_cost) if isinstance(max_cost, int | float) and math.isfinite(max_cost) else None
    written_types = {str(g): str(t) for g, t in (decision.get("written_types") or {}).items()}
    types = carried_types(previous, str(decision.get("fingerprint")), written_types, policy.mode)
    facts = dict(decision.get("facts") or {})
    nxt = decide(
        policy,
        counts,
        history,
        fingerprint=decision.get("fingerprint"),
        prices=prices,
        max_cost=budget,
        blocked=blocked,
        reset=reset,
        types=types or None,
        facts=facts,
    )
    extra = {"written_types": written_types, "facts": facts}
    return record, state_of(nxt.as_dict(), policy, budget, prices, written, extra=extra)
