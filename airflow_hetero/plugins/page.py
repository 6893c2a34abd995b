"""The "Instance groups" page: per-group utilisation charts and the verdict, as one self-contained HTML page (pure).

Input is the summary of :func:`airflow_hetero.logs.summarize.summarize_training_job` as stored in
XCom. Charts are inline SVG drawn here, styles are inline, and there is no script: the page loads
nothing from anywhere (the app serves it with a CSP that forbids it). Values are drawn as the summary
states them, per device (it divided SageMaker's CPU and GPU figures by the instance's vCPUs or GPUs
when it was built, :mod:`airflow_hetero.logs.capacity`), 0-100 %.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from airflow_hetero.amounts import format_amount
from airflow_hetero.logs.accessors import (
    cost_of,
    device_counts_of,
    error_samples_of,
    groups_of,
    hosts_of,
    queue_attempts_of,
    series_of,
    truncated_of,
    unmapped_of,
    verdict_of,
)
from airflow_hetero.logs.cost import priced_nonzero
from airflow_hetero.logs.series import SERIES_METRICS
from airflow_hetero.logs.shape import Cost, CostHeadline, QueueAttempts, Series, Verdict, VerdictHeadline
from airflow_hetero.logs.table import PRICE_SOURCES
from airflow_hetero.logs.verdict import effect_line, state_label

#: Series key -> (label, colour, device kind dividing it).
LINES: dict[str, tuple[str, str, str | None]] = {
    "cpu": ("CPU", "#1f77b4", "cpus"),
    "memory": ("memory", "#2ca02c", None),
    "gpu": ("GPU", "#d62728", "gpus"),
    "gpu_memory": ("GPU memory", "#ff7f0e", "gpus"),
    "disk": ("disk", "#7f7f7f", None),
}
#: Content-Security-Policy of the page: nothing but itself, inline styles and no scripts.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'"
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 200, 44, 12, 12, 30

STYLE = """
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:16px;color:#1a202c;background:#fff}
h1{font-size:18px;margin:0 0 8px}h2{font-size:15px;margin:18px 0 4px}
.verdict{border-left:6px solid #718096;background:#f7fafc;padding:10px 14px;margin:10px 0;font-size:15px}
.verdict.bottleneck{border-color:#e53e3e;background:#fff5f5}.verdict.balanced{border-color:#38a169;background:#f0fff4}
.verdict.not_saturated{border-color:#d69e2e;background:#fffff0}
.muted{color:#4a5568;font-size:12px}table{border-collapse:collapse;margin:6px 0}
td,th{border-bottom:1px solid #e2e8f0;padding:3px 10px;text-align:left;font-size:13px}th{background:#edf2f7}
.legend span{display:inline-block;margin-right:12px;font-size:12px}.legend i{display:inline-block;width:14px;
height:3px;margin-right:4px;vertical-align:middle}svg{display:block}
.verdict.failed{border-color:#e53e3e;background:#fff5f5}
pre.errors{background:#fff5f5;border-left:4px solid #e53e3e;padding:6px 10px;margin:4px 0;font-size:12px;
white-space:pre-wrap;overflow-wrap:anywhere}
"""


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{float(value):.{digits}f}"


def _devices(group: Mapping[str, object]) -> dict[str, int | None]:
    """vCPUs and GPUs per instance the summary divided the series by (None: unknown, summed)."""
    devices = device_counts_of(group)
    return {"cpus": devices["cpus"], "gpus": devices["gpus"]} if devices else {"cpus": None, "gpus": None}


#: Tick steps tried, smallest first, in the axis' unit (1-2-5 and the halves of an hour).
_STEPS = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600)
#: An axis has at most this many intervals between ticks.
_MAX_TICK_INTERVALS = 5


def time_ticks(seconds: float) -> list[tuple[float, str]]:
    """Ticks of a time axis of ``seconds``: (fraction of the axis, label) at round multiples of the
    smallest step giving at most five intervals, in seconds under 2 min, hours from 2 h, else minutes."""
    if seconds <= 0:
        return [(0.0, "0 s")]
    unit, per = ("s", 1.0) if seconds < 120 else ("min", 60.0) if seconds < 7200 else ("h", 3600.0)
    length = seconds / per
    steps = [0.5 * s for s in _STEPS] if unit == "h" else list(_STEPS)
    step = next((s for s in steps if length / s <= _MAX_TICK_INTERVALS), steps[-1])
    ticks = []
    for i in range(int(length / step + 1e-9) + 1):
        ticks.append((i * step / length, f"{i * step:g} {unit}"))
    return ticks


def chart(series: Series, devices: Mapping[str, int | None], thresholds: Mapping[str, Any]) -> str:
    """One group's series (per device, as the summary states it) as an inline SVG line chart, with the
    busy and waiting lines; ``devices`` None for a kind: its line is SageMaker's sum, labelled so."""
    count = int(series.get("points") or 0)
    step = float(series.get("step_seconds") or 60)
    lines: list[tuple[str, str, list[float | None]]] = []
    for key in SERIES_METRICS.values():
        line = series.get(key)
        values = line["avg"] if line else None
        if not values:
            continue
        label, colour, kind = LINES[key]
        divided = devices.get(kind) if kind else 1  # the summary's figures are per device already
        scaled = [None if v is None else float(v) for v in values]
        lines.append((label + ("" if divided or not kind else " (summed)"), colour, scaled))
    top = max([100.0, *(v for _, _, vs in lines for v in vs if v is not None)])
    top = 100.0 if top <= 100 else float(int(top / 100 + 1) * 100)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: float) -> float:
        return LEFT + (plot_w * (i + 0.5) / count if count else 0)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - min(v, top) / top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}"><rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" '
        'fill="#fbfdff" stroke="#cbd5e0"/>'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        ty = y(top * tick)
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#edf2f7"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{ty + 4:.1f}" font-size="10" text-anchor="end">{top * tick:.0f}%</text>')
    for name, colour in (("busy_percent", "#e53e3e"), ("waiting_percent", "#d69e2e")):
        if thresholds.get(name) is not None:
            ty = y(float(thresholds[name]))
            parts.append(
                f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="{colour}" '
                'stroke-dasharray="4 3" stroke-width="1"/>'
            )
    for frac, label in time_ticks(count * step):
        tx = LEFT + plot_w * frac
        anchor = "start" if frac == 0 else "end" if frac > 0.95 else "middle"
        mark = f'x1="{tx:.1f}" x2="{tx:.1f}" y1="{TOP + plot_h}" y2="{TOP + plot_h + 4}"'
        parts.append(f'<line {mark} stroke="#a0aec0"/>')
        parts.append(f'<text x="{tx:.1f}" y="{HEIGHT - 12}" font-size="10" text-anchor="{anchor}">{label}</text>')
    for _label, colour, values in lines:
        runs: list[list[str]] = [[]]
        for i, v in enumerate(values):
            if v is None:
                runs.append([])
            else:
                runs[-1].append(f"{x(i):.1f},{y(v):.1f}")
        for run in runs:
            if len(run) == 1:
                cx, cy = run[0].split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour}"/>')
            elif run:
                parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(run)}"/>')
    parts.append("</svg>")
    legend = "".join(f'<span><i style="background:{colour}"></i>{escape(label)}</span>' for label, colour, _ in lines)
    legend += '<span class="muted">dashed: busy / waiting thresholds</span>'
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def _verdict_table(verdict: Verdict, groups: Mapping[str, Mapping[str, object]]) -> str:
    rows = [
        "<tr><th>group</th><th>instances</th><th>judged on</th><th>busy</th><th>peak</th><th>state</th>"
        "<th>instance-seconds</th><th>waiting</th></tr>"
    ]
    for name, judged in verdict["groups"].items():
        group = groups.get(name) or {}
        share = judged.get("waiting_share")
        resource = {"gpu": "GPUs", "cpu": "CPUs"}.get(judged.get("resource") or "", "-")
        rows.append(
            "<tr>"
            f"<td>{escape(name)}</td>"
            f"<td>{escape(str(group.get('instance_count', '?')))} x "
            f"{escape(str(group.get('instance_type') or '?'))}</td>"
            f"<td>{resource}</td><td>{_num(judged.get('busy_percent'))}%</td>"
            f"<td>{_num(judged.get('peak_percent'))}%</td><td>{escape(state_label(judged))}</td>"
            f"<td>{_num(judged.get('instance_seconds'))}</td>"
            f"<td>{'-' if share is None else f'{float(share):.0%}'}</td>"
            "</tr>"
        )
    return f"<table>{''.join(rows)}</table>"


def _error_lines(section: Mapping[str, object]) -> str:
    """A group's (or the unmapped hosts') error and warning counts and its first error lines, host and time first."""
    errors, warnings = section.get("errors"), section.get("warnings")
    if not errors and not warnings:
        return ""
    samples = error_samples_of(section)
    shown = f", the first {len(samples)}:" if samples else ""
    out = f'<p class="muted">{_num(errors)} error lines, {_num(warnings)} warnings{shown}</p>'
    lines = []
    for sample in samples:
        head = " ".join(str(part) for part in (sample.get("host"), sample.get("time")) if part)
        lines.append(f"{head}  {sample.get('line')}")
        exception = sample.get("exception")
        if exception and exception != sample.get("line"):
            lines.append(f"{' ' * len(head)}  {exception}")
    return out + (f'<pre class="errors">{escape(chr(10).join(lines))}</pre>' if lines else "")


def _money(value: Any, *, known_nonzero: bool = False) -> str:
    """An amount as every view prints it (:func:`~airflow_hetero.amounts.format_amount`)."""
    return format_amount(None if value is None else float(value), known_nonzero=known_nonzero)


def _cost_table(cost: Cost | CostHeadline) -> str:
    """The cost per group, the total and the waiting cost, then where each price came from."""
    currency = escape(str(cost.get("currency")))
    if "groups" not in cost:
        return f'<p class="muted">Cost: {_money(cost.get("total"))} {currency} (details cut to fit the XCom bound)</p>'
    spot = cost.get("spot") is not None  # a managed spot job: what each group saved
    rows = [
        f"<tr><th>group</th><th>instance-seconds</th><th>{currency}/h</th><th>cost</th>"
        "<th>waiting instance-seconds</th><th>waiting cost</th>" + ("<th>spot saving</th>" if spot else "") + "</tr>"
    ]
    for name, g in cost["groups"].items():
        reason = f' title="{escape(g["reason"])}"' if "reason" in g else ""
        per_hour = g["price_per_hour"]
        waited = _money(g["waiting_cost"], known_nonzero=priced_nonzero(g["waiting_instance_seconds"], per_hour))
        rows.append(
            f"<tr><td>{escape(name)}</td><td>{_num(g['instance_seconds'])}</td><td>{_money(g['price_per_hour'])}</td>"
            f"<td{reason}>{_money(g['cost'], known_nonzero=priced_nonzero(g['instance_seconds'], per_hour))}</td>"
            f"<td>{_num(g['waiting_instance_seconds'])}</td>"
            f"<td>{waited}</td>"
            + (f"<td>{_money(g.get('spot_saving'))}</td>" if spot else "")
            + "</tr>"
        )
    rows.append(
        f"<tr><th>total</th><th></th><th></th><th>{_money(cost['total'])}</th><th></th>"
        f"<th>{_money(cost['waiting'])}</th>"
        + (f"<th>{_money(cost.get('spot_saving'))}</th>" if spot else "")
        + "</tr>"
    )
    parts = [f"<h2>Cost <span class='muted'>{currency}</span></h2><table>{''.join(rows)}</table>"]
    for name, price in cost["prices"].items():
        if price.get("per_hour") is not None:
            where = PRICE_SOURCES.get(str(price.get("source")), str(price.get("source")))
            said = f": {price['description']}" if price.get("description") else ""
            text = f"{name}: {price['per_hour']:g} {cost.get('currency')}/h ({where}{said})"
            parts.append(f'<p class="muted">{escape(text)}</p>')
    reasons = [f"{name}: {g['reason']}" for name, g in cost["groups"].items() if "reason" in g]
    parts.extend(f'<p class="muted">Cost unknown for {escape(r)}</p>' for r in reasons)
    parts.extend(f'<p class="muted">Note: {escape(note)}</p>' for note in cost.get("notes") or ())
    return "".join(parts)


def _failure(summary: Mapping[str, Any]) -> str:
    """The job's FailureReason, when it has one (a failed job's tab leads with it)."""
    reason = summary.get("failure_reason")
    return f'<div class="verdict failed"><b>Failure reason:</b> {escape(str(reason))}</div>' if reason else ""


def _verdict_parts(verdict: Verdict | VerdictHeadline | None, groups: Mapping[str, Mapping[str, object]]) -> list[str]:
    """The verdict's box, its table per group, the time spent waiting, the suggestions' effects and notes."""
    if verdict is None:
        return ['<div class="verdict "><b>Verdict:</b> no verdict in this summary</div>']
    parts = [
        f'<div class="verdict {escape(str(verdict.get("kind", "")))}"><b>Verdict:</b> '
        f"{escape(str(verdict.get('message') or 'no verdict in this summary'))}</div>",
    ]
    full = verdict if "groups" in verdict else None
    if full and full["groups"]:
        parts.append(_verdict_table(full, groups))
    waiting_share = verdict.get("waiting_share")
    if waiting_share is not None:
        waited, total = (full["waiting_instance_seconds"], full["instance_seconds"]) if full else (None, None)
        parts.append(
            f'<p class="muted">Instance time spent waiting: {_num(waited)} of '
            f"{_num(total)} instance-seconds ({float(waiting_share):.0%}).</p>"
        )
    suggestion = verdict.get("suggestion")
    effects = [(suggestion["group"], suggestion["effect"])] if suggestion and "effect" in suggestion else []
    effects += [(n, g["effect"]) for n, g in (full["groups"] if full else {}).items() if "effect" in g]
    parts.extend(f"<p>{escape(effect_line(name, effect).strip())}</p>" for name, effect in effects)
    parts.extend(f'<p class="muted">Note: {escape(note)}</p>' for note in (full["notes"] if full else ()))
    return parts


def _queue_table(queue: QueueAttempts) -> str:
    """The service job a queued job ran in: every attempt's training job, status, billed time and cost."""
    currency = escape(queue["currency"])
    rows = "".join(
        f"<tr><td>{escape(a['training_job'])}</td><td>{escape(str(a['status']))}</td>"
        f"<td>{_num(a['billable_seconds'])}</td><td{_title(a.get('reason'))}>{_money(a['cost'])}</td></tr>"
        for a in queue["attempts"]
    )
    where = f" in {queue['job_queue']}" if queue["job_queue"] else ""
    return (
        f"<h2>Queue <span class='muted'>service job {escape(queue['service_job'])} ({escape(queue['job_id'])})"
        f"{escape(where)}</span></h2><table><tr><th>attempt's training job</th><th>status</th>"
        f"<th>billable seconds</th><th>cost ({currency})</th></tr>{rows}"
        f"<tr><th>earlier attempts</th><th></th><th></th><th>{_money(queue['earlier_cost'])}</th></tr>"
        f"<tr><th>all attempts</th><th></th><th></th><th>{_money(queue['total'])}</th></tr></table>"
        '<p class="muted">The groups, charts and cost above are the latest attempt\'s.</p>'
    )


def _title(reason: object) -> str:
    return f' title="{escape(str(reason))}"' if reason else ""


def _rightsizing(view: Any) -> str:
    """The next run's right-sizing decision (docs/rightsizing.md), when the summary holds one."""
    if not isinstance(view, Mapping) or not isinstance(view.get("lines"), list):
        return ""
    head, *rest = [str(line) for line in view["lines"]] or ["Right-sizing"]
    items = "".join(f"<li>{escape(line.strip())}</li>" for line in rest)
    return f'<div class="verdict"><b>{escape(head)}</b><ul>{items}</ul></div>'


def render_page(summary: Mapping[str, Any] | None, *, where: str, runs_href: str | None = None) -> str:
    """The whole page for one task instance's summary (``where`` names the task instance, ``runs_href`` links its
    task's Runs view); a short explanation when the task pushed no summary."""
    head = f'<!doctype html><html><head><meta charset="utf-8"><title>Instance groups</title><style>{STYLE}</style>'
    head += "</head><body>"
    if not isinstance(summary, Mapping) or not isinstance(summary.get("groups"), Mapping):
        return (
            head + "<h1>Instance groups</h1><p>This task instance has no instance-group summary in XCom. "
            "The view shows the <code>return_value</code> of a <code>HeteroLogSummaryOperator</code> task "
            f"(or of a task returning <code>summarize_training_job(...)</code>).</p>"
            f'<p class="muted">{escape(where)}</p></body></html>'
        )
    groups = groups_of(summary)
    verdict = verdict_of(summary)  # or its headline, which has no groups
    thresholds = verdict["thresholds"] if verdict and "groups" in verdict else {}
    body = [
        f"<h1>Instance groups of {escape(str(summary.get('training_job_name')))} "
        f'<span class="muted">{escape(str(summary.get("status")))}'
        f"{' (partial: still running)' if summary.get('partial') else ''}</span></h1>",
        _failure(summary),
        *_verdict_parts(verdict, groups),
    ]
    cost = cost_of(summary)
    if cost:
        body.append(_cost_table(cost))
    queue = queue_attempts_of(summary)
    if queue:
        body.append(_queue_table(queue))
    body.append(_rightsizing(summary.get("rightsizing")))
    for name, group in groups.items():
        body.append(
            f"<h2>{escape(name)} <span class='muted'>{escape(str(group.get('instance_count')))} x "
            f"{escape(str(group.get('instance_type')))}, hosts {escape(', '.join(hosts_of(group)) or '-')}"
            "</span></h2>"
        )
        series = series_of(group)
        if series and series["points"]:
            body.append(chart(series, _devices(group), thresholds))
        else:
            body.append('<p class="muted">No utilisation series for this group (not read, or none published).</p>')
        body.append(_error_lines(group))
    unmapped = unmapped_of(summary)
    if unmapped:
        hosts = ", ".join(hosts_of(unmapped)) or "-"
        body.append(f"<h2>Hosts in no group <span class='muted'>{escape(hosts)}</span></h2>{_error_lines(unmapped)}")
    truncated = truncated_of(summary).get("series")
    if truncated:
        body.append(f'<p class="muted">Series cut to fit the XCom bound: {escape(str(truncated))}</p>')
    runs = f' <a href="{escape(runs_href)}">Runs of this task</a>.' if runs_href else ""
    body.append(
        f'<p class="muted">{escape(where)}. Per device (% of all vCPUs / GPUs): the summary divided '
        f"SageMaker's CPU and GPU figures by the instance's vCPUs or GPUs.{runs}</p></body></html>"
    )
    return head + "".join(body)
