"""A page of a training task's runs: the rows, the one-line headline over them, and the paging (pure).

The Runs view draws a :class:`RunHistory`, ``airflow-hetero runs`` prints it (``--json``: :meth:`RunHistory.as_dict`):
one data model for both. The headline says what a platform team asks of a scheduled retraining, over the runs
of the page: how the cost moved since the last change of the cluster (``cost -31 % since data_group went 2 -> 4
on 2026-11-22``), how many runs fell back for capacity, stopped at the budget or failed, what spot saved, how
long the queue made them wait, and how many runs lack a summary.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_hetero.amounts import format_amount
from airflow_hetero.plugins.run_rows import duration_text, percent, run_row
from airflow_hetero.plugins.runs_model import DEFAULT_LIMIT, RunRow, RunXComs, TaskPair, currency_of, pair_tasks


@dataclass
class RunHistory:
    """One page of a training task's runs, newest first, and what is said over them."""

    dag_id: str
    task_id: str  # as asked: the training task or its summary task
    training_task: str | None
    summary_task: str | None
    page: int  # 1: the newest runs
    limit: int
    has_older: bool  # a next page of older runs exists
    runs: list[RunRow]
    headline: str
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON: what the view draws (``airflow-hetero runs --json``)."""
        return asdict(self)


def run_history(
    dag_id: str,
    task_id: str,
    runs: Sequence[RunXComs],
    *,
    page: int = 1,
    limit: int = DEFAULT_LIMIT,
    has_older: bool = False,
) -> RunHistory:
    """The page of ``runs`` (newest first, at most ``limit``) of ``task_id``: its rows, headline and notes."""
    pair = pair_tasks(runs, task_id)
    rows = [run_row(run, pair) for run in runs[:limit]]
    return RunHistory(
        dag_id,
        task_id,
        pair.training,
        pair.summary,
        page,
        limit,
        has_older,
        rows,
        headline(rows, page=page),
        _notes(pair, runs),
    )


def _notes(pair: TaskPair, runs: Sequence[RunXComs]) -> list[str]:
    """What the whole page lacks: runs, or the summary task."""
    if not runs:
        return ["no runs of this DAG on this page"]
    if pair.summary is None:
        return [
            f"no summary task of {pair.training} found in these runs: no cost and no verdict (a "
            "HeteroLogSummaryOperator with training_task_id= gives them; or ask for the summary's task id)"
        ]
    return []


def _percent(change: float) -> str:
    """``-31 %``, ``+0.4 %``, ``±0 %``."""
    if change == 0:
        return "±0 %"
    return f"{change:+.0f} %" if abs(change) >= 0.5 else f"{change:+.1f} %"


def _costed(rows: Sequence[RunRow]) -> list[float]:
    """The costs of the runs that ran to their end with a known cost."""
    return [row.cost for row in rows if row.cost is not None and row.status == "Completed"]


def cluster_change(oldest_first: Sequence[RunRow]) -> tuple[int, str] | None:
    """(the index of the last run whose cluster differs from the run before it, what changed), comparing the
    runs that ran the cluster planned (not after a capacity fallback); None without a change."""
    found, before = None, None
    for index, row in enumerate(oldest_first):
        if row.fallback or not row.groups:
            continue
        cluster = {g.name: (g.count, g.type) for g in row.groups}
        if before is not None and cluster != before:
            changes = [
                f"{name} went {was[0]} -> {now[0]}" if was[0] != now[0] else f"{name} went {was[1]} -> {now[1]}"
                for name, now in cluster.items()
                if (was := before.get(name)) is not None and was != now
            ]
            found = (index, ", ".join(changes) or "the groups changed")
        before = cluster
    return found


def _planned(rows: Sequence[RunRow]) -> list[float]:
    """The costs of :func:`_costed` runs that ran the cluster planned (not after a capacity fallback)."""
    return _costed([row for row in rows if not row.fallback])


def _cost_part(oldest_first: Sequence[RunRow], currency: str) -> str | None:
    """``cost -31 % since data_group went 2 -> 4 on 2026-11-22``: the mean cost of the runs on the cluster planned
    from the last change of the cluster on against those before it (a run on a capacity fallback cluster is no
    such run: its other type's price is no effect of the change); else the change from the first run to the last."""
    change = cluster_change(oldest_first)
    if change is not None:
        index, what = change
        before, after = _planned(oldest_first[:index]), _planned(oldest_first[index:])
        if before and after:
            moved = (statistics.fmean(after) / statistics.fmean(before) - 1) * 100 if statistics.fmean(before) else 0
            day = (oldest_first[index].date or "")[:10]
            return f"cost {_percent(moved)} since {what}" + (f" on {day}" if day else "")
    known = _costed(oldest_first)
    if not known:
        return None
    median = f"cost {format_amount(statistics.median(known))} {currency} per run (median)"
    if len(known) < 2 or not known[0]:
        return median
    return f"{median}, {_percent((known[-1] / known[0] - 1) * 100)} from the first run to the last"


def _count(rows: Sequence[RunRow], kind: str, one: str, many: str) -> str | None:
    found = sum(1 for row in rows if row.has(kind))
    return f"{found} {one if found == 1 else many}" if found else None


def headline(rows: Sequence[RunRow], *, page: int = 1) -> str:
    """One line over ``rows`` (newest first): see the module docstring."""
    if not rows:
        return "no runs"
    oldest_first = list(reversed(rows))
    currency = currency_of(rows)
    parts = [
        _cost_part(oldest_first, currency),
        _count(rows, "capacity", "capacity fallback", "capacity fallbacks"),
        _count(rows, "budget", "budget stop", "budget stops"),
        _count(rows, "limit", "stop at a SageMaker limit", "stops at a SageMaker limit"),
        _count(rows, "failed", "failed", "failed"),
        _spot_part(rows),
        _queue_part(rows),
    ]
    unsummarised = sum(1 for row in rows if any(m.startswith("no summary") for m in row.missing))
    if unsummarised:
        parts.append(f"{unsummarised} without a summary")
    which = "last" if page == 1 else "older"
    said = "; ".join(p for p in parts if p) or "nothing to compare yet"
    return f"{which} {len(rows)} run{'' if len(rows) == 1 else 's'}: {said}"


def _spot_part(rows: Sequence[RunRow]) -> str | None:
    """``spot saved 41 %``: what spot saved of what the spot runs would have cost on demand."""
    spot = [(row.spot_saving, row.cost) for row in rows if row.has("spot")]
    known = [(saved, cost) for saved, cost in spot if saved is not None and cost is not None]
    whole = sum(saved + cost for saved, cost in known)
    if not known or whole <= 0:
        return None
    return f"spot saved {percent(sum(saved for saved, _ in known) / whole)}"


def _queue_part(rows: Sequence[RunRow]) -> str | None:
    """``5 queued (wait 4 min median, 2 retried attempts)``."""
    queued = [row for row in rows if row.has("queue")]
    if not queued:
        return None
    waits = [row.queued_seconds for row in queued if row.queued_seconds is not None]
    retried = sum((row.queue_attempts or 1) - 1 for row in queued)
    parts = [f"wait {duration_text(statistics.median(waits))} median"] if waits else []
    if retried:
        parts.append(f"{retried} retried attempt{'' if retried == 1 else 's'}")
    return f"{len(queued)} queued" + (f" ({', '.join(parts)})" if parts else "")
