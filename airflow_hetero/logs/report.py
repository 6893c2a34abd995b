"""The report of a summary: its per-group table, the capacity fallback the job ran after, then its
verdict, every line within the table's width (pure).

One text for every place that shows a summary: the summary operator's task log, ``airflow-hetero
summarize`` and ``airflow-hetero demo``. The summary may be any JSON mapping (one read back from
XCom, an older one, the size bound's skeleton): its parts are read through
:mod:`airflow_hetero.logs.accessors`, and a part it lacks reads as none.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from airflow_hetero.amounts import format_amount
from airflow_hetero.logs.accessors import (
    capacity_attempts_of,
    groups_of,
    is_skeleton,
    queue_attempts_of,
    verdict_of,
)
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


def _move(name: str, was: tuple[str, int], now: tuple[object, object]) -> str:
    """``train_group fell back ml.g5.xlarge -> ml.g5.2xlarge``; with the counts when they changed."""
    if was[1] == now[1]:
        return f"{name} fell back {was[0]} -> {now[0]}"
    return f"{name} fell back {was[1]} x {was[0]} -> {now[1]} x {now[0]}"


def capacity_lines(summary: Mapping[str, object]) -> list[str]:
    """``Capacity: train_group fell back ml.g5.xlarge -> ml.g5.2xlarge (1 attempt failed: CapacityError)``:
    the groups the job that ran has on other types than the job as written (the first attempt), and
    why; [] without a fallback. The table's types and cost are the job that ran's (a capacity failure
    bills nothing)."""
    attempts = capacity_attempts_of(summary)
    if not attempts:
        return []
    ran = groups_of(summary)
    moves = []
    for group in attempts[0]["instance_groups"]:
        final = ran.get(group["name"], {})
        now = (final.get("instance_type"), final.get("instance_count"))
        if now != (group["type"], group["count"]):
            moves.append(_move(group["name"], (group["type"], group["count"]), now))
    codes = ", ".join(attempt["reason"].split(":", 1)[0] for attempt in attempts)
    failed = f"{len(attempts)} attempt{'s' if len(attempts) > 1 else ''} failed: {codes}"
    return wrap_indented(strip_control(f"Capacity: {', '.join(moves) or 'no group moved'} ({failed})"))


def _amount(value: float | None, currency: str) -> str:
    """``1.224 USD``, or ``unknown`` (:func:`~airflow_hetero.amounts.format_amount`)."""
    return "unknown" if value is None else f"{format_amount(value)} {currency}"


def queue_lines(summary: Mapping[str, object]) -> list[str]:
    """``Queue: service job train-1 (id) in gpu-queue, 2 attempts; earlier attempts cost 1.23 USD, all attempts
    4.56 USD``: the service job a queued job ran in, with every attempt's cost; [] when it was not queued."""
    queue = queue_attempts_of(summary)
    if queue is None:
        return []
    count, currency = len(queue["attempts"]), queue["currency"]
    where = f" in {queue['job_queue']}" if queue["job_queue"] else ""
    attempts = f"{count} attempt{'s' if count != 1 else ''}"
    line = (
        f"Queue: service job {queue['service_job']} ({queue['job_id']}){where}, {attempts}"
        f"; earlier attempts cost {_amount(queue['earlier_cost'], currency)}"
        f", all attempts {_amount(queue['total'], currency)}"
    )
    return wrap_indented(strip_control(line))


def format_report(summary: Mapping[str, object]) -> str:
    """The table (:func:`~airflow_hetero.logs.table.format_table`), the capacity fallback, the queue's
    attempts, then the verdict: what the task log, the CLI and the demo print."""
    return "\n".join([format_table(summary), *capacity_lines(summary), *queue_lines(summary), *verdict_lines(summary)])
