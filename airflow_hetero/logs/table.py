"""The summary as a per-group table for the task log, every line within :data:`TABLE_WIDTH` (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from airflow_hetero.amounts import format_amount
from airflow_hetero.logs.accessors import (
    cost_of,
    error_samples_of,
    groups_of,
    hosts_of,
    metrics_of,
    problems_of,
    truncated_of,
    unmapped_of,
    utilization_of,
)
from airflow_hetero.logs.cost import priced_nonzero
from airflow_hetero.logs.shape import UTILIZATION_METRICS, Cost, CostHeadline, Utilization, UtilizationStat
from airflow_hetero.logs.text import strip_control


def _percent(value: float | None) -> str:
    """A utilisation percentage, with enough digits that a small one does not read as 0."""
    if value is None:
        return "-"
    if value == 0 or abs(value) >= 10:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2g}"


def _util(value: UtilizationStat | None) -> str:
    if not value:
        return "-"
    summed = "*" if "summed" in str(value.get("unit") or "") else ""
    return f"{_percent(value.get('avg'))}/{_percent(value.get('max'))}{summed}"


def _utilization_note(utils: list[Utilization | None]) -> str | None:
    """The unit of the utilisation columns, and what a '-' (no datapoints) or a '*' (summed) means."""
    if not utils:
        return None
    if all(util is None for util in utils):
        return "utilisation: not read (include_metrics=False)"
    note = (
        "utilisation: avg/max over the training window, in % of all the group's vCPUs (cpu), GPUs (gpu),"
        " GPU memory and memory: 100 = every device busy"
    )
    stats = [stat for util in utils if util for key in UTILIZATION_METRICS.values() if (stat := util.get(key))]
    if any("summed" in str(stat.get("unit") or "") for stat in stats):
        note += "; * = SageMaker's sum over devices (100 per device): the instance type's count is unknown"
    if all(util is not None and util.get(key) for util in utils for key in UTILIZATION_METRICS.values()):
        return note
    note += "; '-' = no CloudWatch datapoints for the group"
    if not any(util and (util.get("gpu") or util.get("gpu_memory")) for util in utils):
        note += (
            ". No GPU datapoints for any group: SageMaker publishes GPU metrics only for GPU instances,"
            " and local runs (the offline endpoint) have no GPUs"
        )
    return note


#: Columns the task-log table may use: the UI's log view shows about this many without cutting.
TABLE_WIDTH = 100


def _wrap(text: str, width: int = TABLE_WIDTH) -> list[str]:
    """A long line as several of at most ``width`` columns, continuations indented."""
    import textwrap

    lines = textwrap.wrap(text, width=width, subsequent_indent="  ", break_on_hyphens=False)
    return lines or [""]


def grid(rows: list[list[str]], *, wrap_column: int | None = None, width: int = TABLE_WIDTH) -> list[str]:
    """Aligned columns within ``width``; ``wrap_column``'s comma lists wrap onto continuation lines.

    When even that does not fit (very long group names), each row is stacked as ``name: value``
    lines instead, so nothing is ever cut at the right edge.
    """
    header = rows[0]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    if wrap_column is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        others = sum(w for i, w in enumerate(widths) if i != wrap_column) + 2 * (len(widths) - 1)
        longest_item = max(len(item) for row in rows[1:] for item in row[wrap_column].split(","))
        widths[wrap_column] = max(len(header[wrap_column]), longest_item, width - others)
    if sum(widths) + 2 * (len(widths) - 1) > width:
        return _stacked(rows, width)
    lines = []
    for row in rows:
        cells = [[cell] for cell in row]
        if wrap_column is not None:
            cells[wrap_column] = _split_list(row[wrap_column], widths[wrap_column])
        for part in range(max(len(c) for c in cells)):
            line = [(c[part] if part < len(c) else "").ljust(w) for c, w in zip(cells, widths, strict=True)]
            lines.append("  ".join(line).rstrip())
    return lines


def _split_list(cell: str, width: int) -> list[str]:
    """A comma-separated cell in pieces of at most ``width`` characters, split after commas."""
    pieces: list[str] = []
    for item in cell.split(","):
        if pieces and len(pieces[-1]) + 1 + len(item) <= width:
            pieces[-1] += "," + item
        else:
            pieces.append(item)
    return [chunk for piece in pieces for chunk in _wrap(piece, width)] or [""]


def _stacked(rows: list[list[str]], width: int) -> list[str]:
    """One block per row: its first cell, then ``column: value`` lines, each within ``width``."""
    header, lines = rows[0], []
    for row in rows[1:]:
        lines.extend(_wrap(f"{header[0]} {row[0]}", width))
        for name, cell in zip(header[1:], row[1:], strict=True):
            lines.extend(_wrap(f"  {name}: {cell}", width))
    return lines


#: How the summary names where a price came from.
PRICE_SOURCES = {"override": "prices=", "pricing_api": "Price List API", "cache": "Price List API, cached"}


def _money(value: float | None, *, known_nonzero: bool = False) -> str:
    """An amount in the cost table (:func:`~airflow_hetero.amounts.format_amount`); ``-`` when there is none."""
    return "-" if value is None else format_amount(value, known_nonzero=known_nonzero)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def cost_lines(cost: Cost | CostHeadline) -> list[str]:
    """The cost table (per group and the total, in the summary's currency), then the prices and notes."""
    currency = cost["currency"]
    if "groups" not in cost:  # cut by the size bound to its total
        total, waited = _money(cost.get("total")), _money(cost.get("waiting"))
        return [f"cost: {total} {currency} in all, waiting {waited} {currency} (details cut to fit max_xcom_bytes)"]
    spot = cost.get("spot") is not None
    rows = [["group", "instance-s", f"{currency}/h", "cost", "waiting s", "waiting cost", *(["spot saving"] * spot)]]
    for name, g in cost["groups"].items():
        rows.append(
            [
                name,
                _seconds(g["instance_seconds"]),
                _money(g["price_per_hour"]),
                format_amount(g["cost"], known_nonzero=priced_nonzero(g["instance_seconds"], g["price_per_hour"])),
                _seconds(g["waiting_instance_seconds"]),
                _money(
                    g["waiting_cost"], known_nonzero=priced_nonzero(g["waiting_instance_seconds"], g["price_per_hour"])
                ),
                *([_money(g.get("spot_saving"))] * spot),
            ]
        )
    seconds = [g["instance_seconds"] for g in cost["groups"].values()]
    priced = [(g["instance_seconds"], g["price_per_hour"]) for g in cost["groups"].values()]
    waiting = [g["waiting_instance_seconds"] for g in cost["groups"].values()]
    rows.append(
        [
            "total",
            _seconds(sum(s for s in seconds if s is not None)) if None not in seconds else "-",
            "",
            format_amount(cost["total"], known_nonzero=any(priced_nonzero(*g) for g in priced)),
            _seconds(round(sum(w for w in waiting if w is not None), 1)) if None not in waiting else "-",
            _money(cost["waiting"]),
            *([_money(cost.get("spot_saving"))] * spot),
        ]
    )
    lines = grid(rows)
    for name, price in cost["prices"].items():
        if price.get("per_hour") is None:
            continue
        where = PRICE_SOURCES.get(str(price.get("source")), str(price.get("source")))
        said = f": {price['description']}" if price.get("description") else ""
        lines.extend(_wrap(f"price of {name}: {price['per_hour']:g} {price['currency']}/h ({where}){said}"))
    lines.extend(line for note in cost["notes"] for line in _wrap(f"cost: {note}"))
    return lines


def format_table(summary: Mapping[str, object]) -> str:
    """A readable per-group summary for the task log, every line within :data:`TABLE_WIDTH`.

    Two stacked tables (logs per group, then utilisation per group), then metrics, first errors
    and problems; a long host list wraps inside its column, long text lines wrap. A skeleton's
    groups and the unmapped hosts' section lack some of a group's keys: rows read them with
    defaults. Any summary reads (one from XCom, an older one): its parts go through
    :mod:`airflow_hetero.logs.accessors`.
    """
    billable = summary.get("billable_seconds")
    lines = _wrap(
        f"Training job {summary.get('training_job_name')}: {summary.get('status')}"
        f" ({summary.get('secondary_status') or '-'})"
        + (f", billable {billable} s" if billable is not None else "")
        + (" [partial: job still running]" if summary.get("partial") else "")
    )
    if summary.get("failure_reason"):
        lines.extend(_wrap(f"Failure reason: {summary['failure_reason']}"))
    logs = [["group", "instance type", "n", "hosts", "streams", "events", "errors", "warnings"]]
    utilisation = [["group", "cpu avg/max", "mem avg/max", "gpu avg/max", "gpu mem avg/max"]]
    groups = groups_of(summary)
    sections: list[tuple[str, Mapping[str, object]]] = list(groups.items())
    unmapped = unmapped_of(summary)  # a skeleton has none
    if unmapped:
        sections.append(("(unmapped)", {**unmapped, "instance_type": "?", "instance_count": "?"}))
    for name, group in sections:
        util = utilization_of(group)
        streams = group.get("log_streams")
        logs.append(
            [
                name,
                str(group.get("instance_type") or "?"),
                str(group.get("instance_count")),
                ",".join(hosts_of(group)) or "-",
                str(len(streams) if isinstance(streams, list) else 0),
                str(group.get("events", 0)),
                str(group.get("errors", 0)),
                str(group.get("warnings", 0)),
            ]
        )
        utilisation.append([name, *(_util(util.get(key) if util else None) for key in UTILIZATION_METRICS.values())])
    lines.extend(grid(logs, wrap_column=3))
    lines.extend(grid(utilisation))
    note = _utilization_note([utilization_of(group) for group in groups.values()])
    if note:
        lines.extend(_wrap(note))
    cost = cost_of(summary)
    if cost:
        lines.extend(cost_lines(cost))
    for name, group in sections:
        for metric, value in metrics_of(group).items():
            lines.extend(
                _wrap(
                    f"{name}: {metric} last={value['last']:g} best={value['best']:g} ({value['goal']}, "
                    f"{value['count']} values)"
                )
            )
        for sample in error_samples_of(group)[:3]:
            text = sample["line"] + (f" -> {sample['exception']}" if sample.get("exception") else "")
            lines.extend(_wrap(f"{name}: first errors: [{sample['host']}] {text[:200]}"))
    for problem in problems_of(summary):
        lines.extend(_wrap(f"problem: {problem}"))
    truncated = truncated_of(summary)
    if truncated:
        lines.extend(_wrap(f"truncated to fit max_xcom_bytes: {json.dumps(truncated)}"))
    return "\n".join(strip_control(line) for line in lines)  # names and reasons come from the job
