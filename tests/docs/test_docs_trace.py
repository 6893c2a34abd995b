"""The trace picture of docs/deployment.md: support/trace_svg.py draws a span list as a static waterfall SVG."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path

import pytest
from support.otlp_receiver import ReceivedSpan
from support.trace_svg import duration_text, load, main, render, rows, trace_of

DOCS = Path(__file__).resolve().parents[2] / "docs"
SVG = "{http://www.w3.org/2000/svg}"
S = 1_000_000_000  # ns


def span(
    name: str, span_id: str, parent: str, start: float, end: float, trace: str = "t1", **attrs: object
) -> ReceivedSpan:
    return ReceivedSpan(name, trace, span_id, parent, int(start * S), int(end * S), dict(attrs))


#: One deferred run, as Airflow and the operator export it, out of order, with a span of another run's trace.
SPANS = [
    span("sagemaker.phase Training", "p3", "job", 14, 40),
    span("worker.train", "w2", "tr", 41, 43, **{"airflow.dag_run.run_id": "deferred-0"}),
    span("dag_run.system_deferred", "dr", "", 0, 50, **{"airflow.dag_id": "system_deferred"}),
    span("task_run.train", "tr", "dr", 1, 43, **{"airflow.dag_run.run_id": "deferred-0"}),
    span("worker.train", "w1", "tr", 2, 5, **{"airflow.dag_run.run_id": "deferred-0"}),
    span("sagemaker.training_job hetero-1a2b", "job", "w2", 3, 41),
    span("sagemaker.phase Starting", "p1", "job", 3, 10),
    span("sagemaker.phase Downloading", "p2", "job", 10, 14),
    span("task_run.summarize", "ts", "dr", 44, 49.5, **{"airflow.dag_run.run_id": "deferred-0"}),
    span("worker.train", "x1", "xr", 0, 99, trace="t2", **{"airflow.dag_run.run_id": "deferred-1"}),
]


def drawn(svg: str) -> ET.Element:
    """The SVG parsed (it must be well-formed XML) and checked static: no script, handler, link or foreign object."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    for element in root.iter():
        assert element.tag.removeprefix(SVG) not in {"script", "foreignObject", "a", "image", "use", "iframe"}
        assert not [k for k in element.attrib if k.lower().startswith("on") or k.endswith("href")], element.attrib
    return root


def test_the_trace_of_a_run_is_its_spans_nested_by_parent_and_ordered_by_start() -> None:
    spans = trace_of(SPANS, "deferred-0")
    assert {s.trace_id for s in spans} == {"t1"} and len(spans) == 9
    assert [(r.depth, r.span.span_id) for r in rows(spans)] == [
        (0, "dr"),
        (1, "tr"),
        (2, "w1"),
        (2, "w2"),
        (3, "job"),
        (4, "p1"),
        (4, "p2"),
        (4, "p3"),
        (1, "ts"),
    ]
    with pytest.raises(ValueError, match="deferred-9"):
        trace_of(SPANS, "deferred-9")


def test_a_span_whose_parent_was_not_received_is_a_root() -> None:
    orphan = span("worker.summarize", "o", "lost", 5, 6)
    assert [(r.depth, r.span.span_id) for r in rows([orphan, SPANS[2]])] == [(0, "dr"), (0, "o")]


def test_the_picture_has_a_row_per_span_indented_by_depth_with_bars_to_scale() -> None:
    spans = trace_of(SPANS, "deferred-0")
    root = drawn(render(spans, "Trace of <system_deferred> & co"))
    texts = [t for t in root.iter(f"{SVG}text")]
    assert texts[0].text == "Trace of <system_deferred> & co"
    labels = {t.text: t for t in texts if t.text}
    for name, depth in [("dag_run.system_deferred", 0), ("task_run.train", 1), ("sagemaker.phase Training", 4)]:
        assert float(labels[name].get("x", "0")) == 10 + 14 * depth, name
    bars = {
        r.find(f"{SVG}title").text: r  # type: ignore[union-attr]
        for r in root.iter(f"{SVG}rect")
        if r.find(f"{SVG}title") is not None
    }
    assert len(bars) == 9  # a bar per span, its tooltip its name and duration
    whole = float(bars["dag_run.system_deferred: 50.0 s"].get("width", "0"))
    training = float(bars["sagemaker.phase Training: 26.0 s"].get("width", "0"))
    assert training / whole == pytest.approx(26 / 50, rel=0.01)
    start = float(bars["dag_run.system_deferred: 50.0 s"].get("x", "0"))
    job = float(bars["sagemaker.training_job hetero-1a2b: 38.0 s"].get("x", "0"))
    assert (job - start) / whole == pytest.approx(3 / 50, rel=0.01)
    assert {"50.0 s", "26.0 s", "5.5 s", "3.0 s", "2.0 s"} <= {t.text for t in texts}  # each span's duration


def test_durations_read_as_a_person_says_them() -> None:
    assert [duration_text(s) for s in (0.0421, 12.44, 185)] == ["42 ms", "12.4 s", "3 min 05 s"]


def test_the_command_draws_a_saved_span_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "spans.json"
    saved.write_text(json.dumps([asdict(s) for s in SPANS]))
    assert load(saved) == SPANS
    main([str(saved), str(tmp_path / "trace.svg"), "--run", "deferred-0"])
    root = drawn((tmp_path / "trace.svg").read_text())
    assert "".join(root.itertext()).count("worker.train") == 2 * 2  # the label and the bar's tooltip of each
    assert "9 spans of deferred-0" in capsys.readouterr().out


def test_the_picture_in_the_docs_is_a_static_trace_of_the_system_test() -> None:
    svg = (DOCS / "img" / "trace.svg").read_text()
    text = "".join(drawn(svg).itertext())
    for name in ("dag_run.system_deferred", "task_run.train", "worker.train", "sagemaker.phase Training"):
        assert name in text, name
    assert re.search(r"sagemaker\.training_job \S+", text)
    assert "img/trace.svg" in (DOCS / "deployment.md").read_text()
