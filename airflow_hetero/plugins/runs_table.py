"""A page of runs as ``airflow-hetero runs`` prints it (pure): the headline, one line per run (newest first:
date, status, length, cost and waiting cost, each group's count and type, the verdict, the markers' letters),
then what happened to a run in words (the right-sizing change it ran with, each marker, what it lacks)."""

from __future__ import annotations

from airflow_hetero.amounts import format_amount
from airflow_hetero.logs.table import grid
from airflow_hetero.logs.text import strip_control
from airflow_hetero.plugins.run_rows import duration_text
from airflow_hetero.plugins.runs_history import RunHistory
from airflow_hetero.plugins.runs_model import MARKERS, RunRow, currency_of, group_names

#: Columns of a terminal the table fits in (wider tables stack each run as ``column: value`` lines).
WIDTH = 140


def _verdict(row: RunRow) -> str:
    if row.verdict_kind is None:
        return "-"
    return f"{row.verdict_kind}: {row.bottleneck}" if row.bottleneck else row.verdict_kind


def _line(row: RunRow, names: list[str]) -> list[str]:
    clusters = {g.name: f"{g.count if g.count is not None else '?'} x {g.type or '?'}" for g in row.groups}
    return [
        (row.date or "-")[:10],
        row.status or "-",
        duration_text(row.seconds) if row.seconds is not None else "-",
        format_amount(row.cost) if row.cost is not None else "-",
        format_amount(row.waiting_cost) if row.waiting_cost is not None else "-",
        *(clusters.get(name, "-") for name in names),
        _verdict(row),
        "".join(MARKERS[m.kind][0] for m in row.markers) or "-",
    ]


def _said(row: RunRow) -> list[str]:
    """What happened to the run in words: its right-sizing change, its markers, what it lacks."""
    day = (row.date or row.run_id)[:10]
    said = (
        [f"right-sizing: {row.decision.line}"]
        if row.decision and (row.decision.moved or "held" in row.decision.line)
        else []
    )
    said += [m.text for m in row.markers]
    said += [f"missing: {m}" for m in row.missing]
    return [f"{day}  {text}" for text in said]


def format_runs(history: RunHistory) -> str:
    """The page of runs for a terminal (see the module docstring)."""
    names = group_names(history.runs)
    cost = f"cost {currency_of(history.runs)}".rstrip()
    header = ["date", "status", "length", cost, "waiting", *names, "verdict", "marks"]
    lines = [f"Runs of {history.training_task or history.task_id} in {history.dag_id}: {history.headline}"]
    lines += [f"note: {note}" for note in history.notes]
    if history.runs:
        lines += grid([header, *(_line(row, names) for row in history.runs)], width=WIDTH)
        marks = ", ".join(f"{letter} {name}" for letter, name in MARKERS.values())
        lines.append(f"marks: {marks}")
    lines += [text for row in history.runs for text in _said(row)]
    if history.has_older:
        lines.append(f"older runs: --page {history.page + 1}")
    return "\n".join(strip_control(line) for line in lines)
