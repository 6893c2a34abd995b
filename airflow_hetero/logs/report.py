"""The report of a summary: its per-group table, then its verdict, every line within the table's width (pure).

One text for every place that shows a summary: the summary operator's task log, ``airflow-hetero
summarize`` and ``airflow-hetero demo``. The summary may be any JSON mapping (one read back from
XCom, an older one, the size bound's skeleton): its parts are read through
:mod:`airflow_hetero.logs.accessors`, and a part it lacks reads as none.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from airflow_hetero.logs.accessors import is_skeleton, verdict_of
from airflow_hetero.logs.table import TABLE_WIDTH, format_table
from airflow_hetero.logs.text import strip_control
from airflow_hetero.logs.verdict import format_verdict

#: The verdict line of a summary that has none.
NO_VERDICT = "Verdict: none in this summary"
#: ... of the size bound's skeleton, which keeps only the job's status and counts.
NO_VERDICT_SKELETON = "Verdict: none (the summary was cut to its skeleton to fit max_xcom_bytes)"


def wrap_indented(line: str, width: int = TABLE_WIDTH) -> list[str]:
    """``line`` within ``width`` columns, continuations indented two more than it."""
    indent = " " * (len(line) - len(line.lstrip()))
    return textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_on_hyphens=False) or [""]


def verdict_lines(summary: Mapping[str, object]) -> list[str]:
    """The verdict as :func:`~airflow_hetero.logs.verdict.format_verdict` says it, wrapped; or why there is none."""
    verdict = verdict_of(summary)
    if verdict is None:
        return [NO_VERDICT_SKELETON if is_skeleton(summary) else NO_VERDICT]
    lines = (strip_control(line) for line in format_verdict(verdict).splitlines())  # group names come from the job
    return [part for line in lines for part in wrap_indented(line)]


def format_report(summary: Mapping[str, object]) -> str:
    """The table (:func:`~airflow_hetero.logs.table.format_table`), then the verdict: what the task log,
    the CLI and the demo print."""
    return "\n".join([format_table(summary), *verdict_lines(summary)])
