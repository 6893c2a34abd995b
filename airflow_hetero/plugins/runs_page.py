"""The "Runs" page: a page of a training task's runs as one self-contained HTML page (pure).

Input is a :class:`~airflow_hetero.plugins.runs_history.RunHistory`. At the top its headline; then one chart, runs
oldest to newest from left to right: each run's cost stacked by instance group (the waiting part of a group's cost
hatched), the run's length as a line on the right axis, a dashed line where right-sizing changed the cluster (an
undo in red, a recommendation dotted), and above each bar its markers as lettered discs; a legend says all of it.
Under it a table, newest first: each run's groups (count, type, cost), length, cost, the right-sizing line, the
markers in words, the verdict and what the run lacks; links page to older and newer runs. Inline SVG and styles,
no script: the page loads nothing (the apps serve it with :data:`~airflow_hetero.plugins.page.CSP`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from urllib.parse import urlencode

from airflow_hetero.amounts import format_amount
from airflow_hetero.logs.cost import priced_nonzero
from airflow_hetero.plugins.page import STYLE, time_ticks
from airflow_hetero.plugins.run_rows import duration_text
from airflow_hetero.plugins.runs_history import RunHistory
from airflow_hetero.plugins.runs_model import MARKERS, GroupRow, RunRow, currency_of, group_names

#: Colours of the instance groups, in the order they first appear (SageMaker allows five).
GROUP_COLOURS = ("#4c78a8", "#f2a93b", "#59a14f", "#b07aa1", "#9c755f")
#: A group past the fifth, or a cost known only in total.
OTHER_COLOUR = "#a0aec0"
#: Each marker's disc colour.
MARKER_COLOURS = {
    "failed": "#c53030",
    "budget": "#6b46c1",
    "limit": "#744210",
    "capacity": "#dd6b20",
    "spot": "#2c7a7b",
    "queue": "#2b6cb0",
}
#: The run-length line, and the right-sizing change lines: applied, undone, recommended.
LENGTH_COLOUR = "#2d3748"
CHANGE_COLOURS = {"changed": "#2f855a", "undone": "#c53030", "recommended": "#718096"}
BAR, GAP, LEFT, RIGHT, TOP, BOTTOM, HEIGHT = 22, 10, 64, 64, 24 + 4 * 16, 40, 380

RUNS_STYLE = """
.headline{border-left:6px solid #2b6cb0;background:#ebf8ff;padding:10px 14px;margin:10px 0;font-size:15px}
table.runs td{vertical-align:top;font-size:12px}.runs .k{display:inline-block;width:13px;height:13px;border-radius:7px;
color:#fff;font-size:9px;line-height:13px;text-align:center;font-weight:700;margin-right:3px}
.legend span{margin-bottom:4px}.pager a{margin-right:16px}.current{background:#fffbea}
"""


def _colours(history: RunHistory) -> dict[str, str]:
    names = group_names(history.runs)
    return {name: GROUP_COLOURS[i] if i < len(GROUP_COLOURS) else OTHER_COLOUR for i, name in enumerate(names)}


def _top(value: float) -> float:
    """The axis' top: ``value`` rounded up to 1, 2 or 5 times a power of ten."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value)


def _segments(row: RunRow) -> list[tuple[GroupRow | None, float, float]]:
    """(group, cost, waiting cost) of each stacked segment: the groups' costs, else the total alone."""
    priced = [(g, g.cost, g.waiting_cost or 0.0) for g in row.groups if g.cost is not None]
    if priced:
        return [(g, cost, min(waited, cost)) for g, cost, waited in priced]
    return [(None, row.cost, 0.0)] if row.cost is not None else []


def _bar(x: float, y0: float, scale: float, row: RunRow, colours: Mapping[str, str]) -> list[str]:
    """One run's stacked cost; each segment's waiting part hatched at its top."""
    parts, y = [], y0
    for group, cost, waited in _segments(row):
        colour = colours.get(group.name, OTHER_COLOUR) if group else OTHER_COLOUR
        height = cost * scale
        name = group.name if group else "total"
        tip = f"{name}: {format_amount(cost)} {row.currency or ''}, waiting {format_amount(waited)}"
        parts.append(
            f'<rect x="{x:.1f}" y="{y - height:.1f}" width="{BAR}" height="{height:.1f}" fill="{colour}">'
            f"<title>{escape(tip)}</title></rect>"
        )
        if waited > 0:
            pattern = f"w{list(colours).index(group.name)}" if group and group.name in colours else "wo"
            parts.append(
                f'<rect x="{x:.1f}" y="{y - height:.1f}" width="{BAR}" height="{waited * scale:.1f}" '
                f'fill="url(#{pattern})" stroke="{colour}"/>'
            )
        y -= height
    if not _segments(row):
        parts.append(f'<text x="{x + BAR / 2:.1f}" y="{y0 - 4:.1f}" font-size="11" text-anchor="middle">?</text>')
    return parts


def _markers(x: float, y: float, row: RunRow) -> list[str]:
    """Lettered discs above the bar, one per marker."""
    out = []
    for i, marker in enumerate(row.markers):
        cy = y - 10 - i * 16
        letter = MARKERS[marker.kind][0]
        out.append(
            f'<g><title>{escape(marker.text)}</title><circle cx="{x + BAR / 2:.1f}" cy="{cy:.1f}" r="7" '
            f'fill="{MARKER_COLOURS[marker.kind]}"/><text x="{x + BAR / 2:.1f}" y="{cy + 3.5:.1f}" font-size="9" '
            f'font-weight="700" fill="#fff" text-anchor="middle">{letter}</text></g>'
        )
    return out


def _change(x: float, row: RunRow) -> str:
    """A dashed line before a run whose right-sizing decision moved a group (dotted: only recommended)."""
    decision = row.decision
    if decision is None or not decision.moved:
        return ""
    kind = "undone" if decision.undo else "changed" if decision.mode == "apply" else "recommended"
    dash = "2 3" if kind == "recommended" else "6 3"
    return (
        f'<line x1="{x - GAP / 2:.1f}" x2="{x - GAP / 2:.1f}" y1="{TOP - 4 * 16}" y2="{HEIGHT - BOTTOM}" '
        f'stroke="{CHANGE_COLOURS[kind]}" stroke-width="2" stroke-dasharray="{dash}">'
        f"<title>{escape(decision.line)}</title></line>"
    )


def chart(history: RunHistory, colours: Mapping[str, str], current_run: str | None = None) -> str:
    """The runs' stacked costs, lengths, changes and markers as one inline SVG (oldest run on the left)."""
    runs = list(reversed(history.runs))
    width = LEFT + RIGHT + max(len(runs), 8) * (BAR + GAP)
    plot_h = HEIGHT - TOP - BOTTOM
    cost_top = _top(max([sum(c for _, c, _ in _segments(r)) for r in runs] + [0.0]))
    length_top = max([r.seconds or 0.0 for r in runs] + [0.0]) * 1.1 or 60.0  # the longest run under the top
    scale, base = plot_h / cost_top, HEIGHT - BOTTOM
    defs = "".join(
        f'<pattern id="w{i}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect width="6" height="6" fill="#fff"/><line x1="0" y1="0" x2="0" y2="6" stroke="{colour}" '
        'stroke-width="3"/></pattern>'
        for i, colour in enumerate([*colours.values(), OTHER_COLOUR])
    ).replace(f'id="w{len(colours)}"', 'id="wo"')
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" role="img" '
        f'viewBox="0 0 {width} {HEIGHT}" class="runs-chart" style="max-width:100%;height:auto"><defs>{defs}</defs>'
        f'<rect x="{LEFT}" y="{TOP}" width="{width - LEFT - RIGHT}" height="{plot_h}" fill="#fbfdff" stroke="#cbd5e0"/>'
    ]
    for tick in (0, 0.2, 0.4, 0.6, 0.8, 1):
        ty = base - plot_h * tick
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#edf2f7"/>')
        parts.append(
            f'<text x="{LEFT - 4}" y="{ty + 4:.1f}" font-size="10" text-anchor="end">'
            f"{format_amount(cost_top * tick)}</text>"
        )
    for frac, label in time_ticks(length_top):
        parts.append(f'<text x="{width - RIGHT + 4}" y="{base - plot_h * frac + 4:.1f}" font-size="10">{label}</text>')
    currency = currency_of(runs) or "cost"
    parts.append(
        f'<text x="{LEFT - 4}" y="{TOP - 4 * 16 - 6}" font-size="11" text-anchor="end">{escape(currency)}</text>'
    )
    parts.append(f'<text x="{width - RIGHT + 4}" y="{TOP - 4 * 16 - 6}" font-size="11">length</text>')
    points = []
    for i, row in enumerate(runs):
        x = LEFT + GAP / 2 + i * (BAR + GAP)
        if row.run_id == current_run:
            parts.append(
                f'<rect x="{x - GAP / 2:.1f}" y="{TOP}" width="{BAR + GAP}" height="{plot_h}" fill="#fefcbf"/>'
            )
        parts.append(_change(x, row))
        parts.extend(_bar(x, base, scale, row, colours))
        top = base - sum(c for _, c, _ in _segments(row)) * scale
        parts.extend(_markers(x, min(top, base), row))
        if row.seconds is not None:
            points.append((x + BAR / 2, base - row.seconds / length_top * plot_h, row.seconds))
        label = (row.date or row.run_id)[5:10] if row.date else row.run_id[:5]
        parts.append(
            f'<text x="{x + BAR / 2:.1f}" y="{base + 14}" font-size="9" text-anchor="middle">{escape(label)}</text>'
        )
    if len(points) > 1:
        line = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in points)
        parts.append(f'<polyline fill="none" stroke="{LENGTH_COLOUR}" stroke-width="2" points="{line}"/>')
    parts.extend(
        f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{LENGTH_COLOUR}"><title>{duration_text(s)}</title></circle>'
        for px, py, s in points
    )
    parts.append("</svg>")
    return "".join(parts)


def legend(colours: Mapping[str, str]) -> str:
    """What each colour, hatch, line and disc of the chart means."""
    items = [f'<span><i style="background:{c};height:10px"></i>{escape(name)}</span>' for name, c in colours.items()]
    items.append(
        '<span><svg width="14" height="10" style="display:inline-block;vertical-align:middle;margin-right:4px">'
        '<rect width="14" height="10" fill="#fff" stroke="#4a5568"/><line x1="0" y1="10" x2="10" y2="0" '
        'stroke="#4a5568" stroke-width="2"/></svg>hatched: waiting cost (the group below its busy threshold)</span>'
    )
    items.append(f'<span><i style="background:{LENGTH_COLOUR}"></i>run length (right axis)</span>')
    said = {
        "changed": "right-sizing applied",
        "undone": "right-sizing undone",
        "recommended": "right-sizing recommended",
    }
    items.extend(f'<span><i style="background:{CHANGE_COLOURS[k]}"></i>{escape(v)}</span>' for k, v in said.items())
    items.extend(
        f'<span><b class="k" style="background:{MARKER_COLOURS[kind]}">{letter}</b>{escape(name)}</span>'
        for kind, (letter, name) in MARKERS.items()
    )
    return f'<div class="legend runs">{"".join(items)}</div>'


def _groups_cell(row: RunRow) -> str:
    lines = []
    for g in row.groups:
        cost = (
            ""
            if g.cost is None
            else f": {format_amount(g.cost, known_nonzero=priced_nonzero(g.instance_seconds, g.price_per_hour))}"
        )
        waited = f" (waiting {format_amount(g.waiting_cost)})" if g.waiting_cost else ""
        lines.append(f"{g.name} {g.count if g.count is not None else '?'} x {g.type or '?'}{cost}{waited}")
    return "<br>".join(escape(line) for line in lines) or "-"


def _row(row: RunRow, current_run: str | None) -> str:
    marks = "<br>".join(
        f'<b class="k" style="background:{MARKER_COLOURS[m.kind]}">{MARKERS[m.kind][0]}</b>{escape(m.text)}'
        for m in row.markers
    )
    cost = "-" if row.cost is None else f"{format_amount(row.cost)} {escape(row.currency or '')}"
    if row.waiting_cost:
        cost += f"<br><span class='muted'>waiting {format_amount(row.waiting_cost)}</span>"
    decision = "-" if row.decision is None else escape(row.decision.line)
    if row.decision is not None and row.decision.action == "kept":
        decision = f"<span class='muted'>{decision}</span>"
    missing = "".join(f"<br><span class='muted'>missing: {escape(m)}</span>" for m in row.missing)
    css = ' class="current"' if row.run_id == current_run else ""
    return (
        f"<tr{css}><td>{escape((row.date or '-')[:10])}<br><span class='muted'>{escape(row.run_id)}</span></td>"
        f"<td>{escape(row.status or '-')}<br><span class='muted'>{escape(row.job or 'no job')}</span></td>"
        f"<td>{duration_text(row.seconds) if row.seconds is not None else '-'}</td><td>{cost}</td>"
        f"<td>{_groups_cell(row)}</td><td>{decision}</td><td>{marks or '-'}</td>"
        f"<td>{escape(row.verdict or '-')}{missing}</td></tr>"
    )


def _pager(history: RunHistory, params: Mapping[str, str] | None) -> str:
    if params is None:  # a page saved to a file: no server to ask, so the command's own words
        said = [f"older runs: --page {history.page + 1}"] if history.has_older else []
        said += [f"newer runs: --page {history.page - 1}"] if history.page > 1 else []
        return f'<p class="pager muted">{escape("; ".join(said))}</p>' if said else ""
    links = []
    if history.has_older:
        links.append(f'<a href="?{escape(urlencode({**params, "page": history.page + 1}))}">older runs</a>')
    if history.page > 1:
        links.append(f'<a href="?{escape(urlencode({**params, "page": history.page - 1}))}">newer runs</a>')
    return f'<p class="pager">{"".join(links)}</p>' if links else ""


def task_where(dag_id: str, task_id: str, map_index: int = -1) -> str:
    """The page's last line: which task's runs these are (``DAG d, task t`` or ``... t[2]``)."""
    return f"DAG {dag_id}, task {task_id}" + (f"[{map_index}]" if map_index >= 0 else "")


def render_runs_page(
    history: RunHistory, *, where: str, params: Mapping[str, str] | None, current_run: str | None = None
) -> str:
    """The whole page (``where`` names the DAG and task; ``params``: the query the pager's links keep, the page
    number aside, None for a page saved to a file (``airflow-hetero runs --html``); ``current_run``: the run to
    highlight, the task instance the page was opened from)."""
    colours = _colours(history)
    title = history.training_task or history.task_id
    first = (history.page - 1) * history.limit + 1
    span = f"runs {first} to {first + len(history.runs) - 1}, newest first" if history.runs else "no runs"
    body = [
        f"<h1>Runs of {escape(title)} <span class='muted'>{escape(span)}</span></h1>",
        f'<div class="headline">{escape(history.headline)}</div>',
        *(f'<p class="muted">Note: {escape(note)}</p>' for note in history.notes),
    ]
    if history.runs:
        body += [chart(history, colours, current_run), legend(colours), _pager(history, params)]
        header = "".join(
            f"<th>{h}</th>" for h in ("run", "status", "length", "cost", "groups", "right-sizing", "markers", "verdict")
        )
        rows = "".join(_row(row, current_run) for row in history.runs)
        body.append(f'<table class="runs"><tr>{header}</tr>{rows}</table>')
        body.append(_pager(history, params))
    summary = f" (its summary task: {history.summary_task})" if history.summary_task else ""
    body.append(f'<p class="muted">{escape(where)}{escape(summary)}.</p>')
    head = f'<!doctype html><html><head><meta charset="utf-8"><title>Runs</title><style>{STYLE}{RUNS_STYLE}</style>'
    return head + "</head><body>" + "".join(body) + "</body></html>"
