"""A waterfall picture of one DAG run's trace, from the spans the system test's OTLP receiver kept.

``PYTHONPATH=tests python -m support.trace_svg SPANS.json OUT.svg [--run RUN_ID]`` draws the trace of
the DAG run ``RUN_ID`` (default ``deferred-0``, a run of the system test's deferrable DAG): one row per
span, nested by parent id (indented names, children by start time), a bar from its start to its end on
one time axis, and its duration. ``SPANS.json`` is the ``logs/spans.json`` a system test run leaves
(:meth:`support.otlp_receiver.OtlpReceiver.save`; ``HETERO_SYSTEM_KEEP=1`` keeps it). The SVG is
static (no script, no link, nothing loaded): docs/img/trace.svg in docs/deployment.md.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from support.otlp_receiver import ReceivedSpan

__all__ = ["Row", "duration_text", "load", "main", "render", "rows", "trace_of"]

#: The attribute Airflow's own spans carry the DAG run id in.
RUN_ID = "airflow.dag_run.run_id"
WIDTH = 1000
ROW = 22
TOP = 58  # the title and the time axis above the first row
INDENT = 14
CHAR = 6.7  # the width of one character of the 11-px monospace labels
LABEL_WIDTH = 430
DURATION_WIDTH = 74
MARGIN = 10
#: Bar colours by what made the span: Airflow (blues: the scheduler, the api-server, the worker, the triggerer, the
#: resumable-job mixin), the operator's job span, the job's SageMaker phases.
AIRFLOW = {
    "dag_run.": "#3b5b92",
    "task_run.": "#5a7fbf",
    "worker.": "#86a6d9",
    "trigger.": "#7a78c2",
    "resumable_job.": "#a9bde0",
}
JOB = "#d9782d"
PHASES = {
    "Starting": "#e8b53a",
    "Downloading": "#4fa39a",
    "Training": "#c8553d",
    "Uploading": "#6ea04a",
    "Interrupted": "#8c8c8c",
    "Restarting": "#b0b0b0",
}
OTHER = "#a9a9a9"
#: Tick steps of the time axis, in seconds: the first that needs at most ``MAX_TICKS`` ticks.
STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
MAX_TICKS = 10


@dataclass(frozen=True)
class Row:
    """One span in the picture, ``depth`` parents below the trace's root."""

    depth: int
    span: ReceivedSpan


def load(path: Path) -> list[ReceivedSpan]:
    """The spans a receiver saved."""
    return [ReceivedSpan(**fields) for fields in json.loads(path.read_text())]


def trace_of(spans: list[ReceivedSpan], run_id: str) -> list[ReceivedSpan]:
    """Every span of the traces in which a span names the DAG run ``run_id``."""
    traces = {s.trace_id for s in spans if s.attributes.get(RUN_ID) == run_id}
    if not traces:
        raise ValueError(f"no span of the DAG run {run_id!r} among {len(spans)} spans")
    return [s for s in spans if s.trace_id in traces]


def rows(spans: list[ReceivedSpan]) -> list[Row]:
    """Depth first from the roots (spans whose parent is not among ``spans``), each level by start time."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else ""
        children.setdefault(parent, []).append(span)
    ordered: list[Row] = []
    seen: set[str] = set()

    def walk(parent: str, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s.start_ns, s.name)):
            if span.span_id not in seen:  # a span whose id repeats is drawn once
                seen.add(span.span_id)
                ordered.append(Row(depth, span))
                walk(span.span_id, depth + 1)

    walk("", 0)
    return ordered


def duration_text(seconds: float) -> str:
    """``850 ms``, ``12.4 s``, ``3 min 05 s``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def colour(name: str) -> str:
    """The bar colour of a span named ``name``."""
    if name.startswith("sagemaker.phase "):
        return PHASES.get(name.removeprefix("sagemaker.phase "), OTHER)
    if name.startswith("sagemaker.training_job"):
        return JOB
    return next((c for prefix, c in AIRFLOW.items() if name.startswith(prefix)), OTHER)


def _label(row: Row) -> str:
    room = int((LABEL_WIDTH - row.depth * INDENT) / CHAR)
    name = row.span.name
    return name if len(name) <= room else name[: room - 1] + "…"


def _step(total: float) -> float:
    return next((s for s in STEPS if total / s <= MAX_TICKS), STEPS[-1] * math.ceil(total / STEPS[-1] / MAX_TICKS))


def render(spans: list[ReceivedSpan], title: str) -> str:
    """The waterfall of ``spans`` as a standalone SVG document."""
    drawn = rows(spans)
    if not drawn:
        raise ValueError("no spans to draw")
    start = min(r.span.start_ns for r in drawn)
    total = max(max(r.span.end_ns for r in drawn) - start, 1) / 1e9
    left = MARGIN + LABEL_WIDTH + MARGIN
    chart = WIDTH - left - DURATION_WIDTH - MARGIN
    height = TOP + ROW * len(drawn) + 40

    def x(ns: int) -> float:
        return left + (ns - start) / 1e9 / total * chart

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="{MARGIN}" y="20" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    parts += [
        f'<rect x="0" y="{TOP + i * ROW}" width="{WIDTH}" height="{ROW}" fill="#f6f7f9"/>'
        for i in range(1, len(drawn), 2)
    ]
    step = _step(total)
    for i in range(math.floor(total / step) + 1):
        tick = left + i * step / total * chart
        parts.append(f'<line x1="{tick:.1f}" y1="{TOP - 8}" x2="{tick:.1f}" y2="{height - 40}" stroke="#e4e4e4"/>')
        parts.append(f'<text x="{tick:.1f}" y="{TOP - 12}" text-anchor="middle" fill="#666">{i * step:g} s</text>')
    for index, row in enumerate(drawn):
        span = row.span
        y = TOP + index * ROW
        seconds = (span.end_ns - span.start_ns) / 1e9
        bar_x, bar_w = x(span.start_ns), max(x(span.end_ns) - x(span.start_ns), 1.5)
        tip = escape(f"{span.name}: {duration_text(seconds)}")
        parts.append(f'<text x="{MARGIN + row.depth * INDENT}" y="{y + 15}">{escape(_label(row))}</text>')
        parts.append(
            f'<rect x="{bar_x:.1f}" y="{y + 5}" width="{bar_w:.1f}" height="{ROW - 10}" rx="2" '
            f"fill={quoteattr(colour(span.name))}><title>{tip}</title></rect>"
        )
        parts.append(
            f'<text x="{WIDTH - MARGIN}" y="{y + 15}" text-anchor="end" fill="#444">{duration_text(seconds)}</text>'
        )
    legend = [("Airflow's spans", AIRFLOW["task_run."]), ("the operator's job span", JOB), ("SageMaker phases", None)]
    lx, ly = MARGIN, height - 18
    for text, fill in legend:
        swatches = [fill] if fill else [PHASES[p] for p in ("Starting", "Downloading", "Training", "Uploading")]
        for swatch in swatches:
            parts.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{swatch}"/>')
            lx += 12
        parts.append(f'<text x="{lx + 2}" y="{ly}" fill="#444">{escape(text)}</text>')
        lx += 2 + int(len(text) * CHAR) + 24
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Draw the trace of one DAG run from a saved span list into an SVG file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("spans", type=Path, help="logs/spans.json of a system test run")
    parser.add_argument("out", type=Path, help="the SVG to write (docs/img/trace.svg)")
    parser.add_argument("--run", default="deferred-0", help="the DAG run id whose trace to draw")
    args = parser.parse_args(argv)
    spans = trace_of(load(args.spans), args.run)
    dag = next((str(s.attributes["airflow.dag_id"]) for s in spans if "airflow.dag_id" in s.attributes), "?")
    args.out.write_text(render(spans, f"Trace of the DAG run {dag} / {args.run}"))
    print(f"{args.out}: {len(spans)} spans of {args.run}")


if __name__ == "__main__":
    main()
