"""The Instance groups page as a browser reads it: well-formed HTML, each legend under its own chart (headless
Chromium, wide and narrow windows), time axes with nice ticks, a failed job's reason and error lines, and the
over-provisioned state saying its number counts instances."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from support.page_layout import layout, nesting_problems

from airflow_hetero.logs.verdict import format_verdict
from airflow_hetero.plugins.page import chart, render_page


def series(points: int, step: int = 60) -> dict[str, Any]:
    return {
        "start": "2026-11-30T05:00:00.000Z",
        "start_epoch": 0.0,
        "step_seconds": step,
        "points": points,
        "cpu": {"avg": [50.0 + i for i in range(points)], "max": [60.0 + i for i in range(points)]},
        "gpu": {"avg": [30.0] * points, "max": [35.0] * points},
    }


def group(kind: str, count: int, **more: Any) -> dict[str, Any]:
    return {
        "instance_type": kind,
        "instance_count": count,
        "devices": {"cpus": 4, "gpus": 1 if "g5" in kind else 0},
        "hosts": [f"algo-{i + 1}" for i in range(count)],
        "errors": 0,
        "warnings": 0,
        "error_samples": [],
        "series": series(3),
        **more,
    }


def two_groups(**more: Any) -> dict[str, Any]:
    """A finished job of two groups, each with a chart; the data group over-provisioned (2 -> 1)."""
    return {
        "training_job_name": "retrain-1",
        "status": "Completed",
        "failure_reason": None,
        "partial": False,
        "groups": {"data_group": group("ml.c5.xlarge", 2), "train_group": group("ml.g5.xlarge", 1)},
        "unmapped": None,
        "verdict": {
            "kind": "not_saturated",
            "message": "No group is saturated",
            "groups": {
                "data_group": {
                    "resource": "cpu",
                    "busy_percent": 8.4,
                    "peak_percent": 16.7,
                    "state": "idle",
                    "instance_count": 2,
                    "over_provisioned": True,
                    "suggested_count": 1,
                },
                "train_group": {"resource": "gpu", "busy_percent": 30.0, "peak_percent": 35.0, "state": "waiting"},
            },
            "thresholds": {"busy_percent": 85, "waiting_percent": 50},
            "notes": [],
            "bottleneck": None,
            "suggestion": None,
            "idle_groups": [],
            "over_provisioned_groups": [],
            "instance_seconds": None,
            "waiting_instance_seconds": None,
            "waiting_share": None,
        },
        "truncated": {},
        **more,
    }


def test_every_element_of_the_page_is_closed_in_order() -> None:
    assert nesting_problems("<div><span>a</div>") != []  # the checker sees a span left open
    assert nesting_problems('<p>a<br><svg><rect x="1"/></svg></p>') == []
    html = render_page(two_groups(), where="DAG d")
    assert nesting_problems(html) == []
    assert html.count('<div class="legend">') == 2
    assert nesting_problems(render_page(None, where="DAG d")) == []
    failed = two_groups(status="Failed", failure_reason="AlgorithmError: <x>")
    failed["groups"]["train_group"] |= {"errors": 1, "error_samples": [{"host": "algo-3", "time": None, "line": "E"}]}
    assert nesting_problems(render_page(failed, where="DAG d")) == []


@pytest.mark.parametrize("width", [800, 1400, 2560])
def test_each_legend_sits_under_its_own_chart(width: int, tmp_path: Path) -> None:
    """In narrow and wide windows alike: the charts start at the same left edge, and the n-th legend
    starts just below the n-th chart, above the next group's heading."""
    boxes = layout(render_page(two_groups(), where="DAG d"), width, 1600, tmp_path)
    charts, legends, headings = boxes["charts"], boxes["legends"], boxes["headings"]
    assert len(charts) == len(legends) == 2, boxes
    assert charts[0]["left"] == charts[1]["left"], boxes  # the second chart is not indented
    for chart_box, legend in zip(charts, legends, strict=True):
        assert 0 <= legend["top"] - chart_box["bottom"] < 30, boxes
        assert abs(legend["left"] - chart_box["left"]) < 2, boxes
        assert legend["bottom"] - legend["top"] < 40, boxes  # one line of legend, not the rest of the page
    assert legends[0]["bottom"] <= headings[-1]["top"], boxes  # the first legend comes before the second group


def labels(svg: str) -> list[str]:
    return re.findall(r'<text[^>]*text-anchor="(?:start|middle|end)"[^>]*>([^<]*min|[^<]*s|[^<]*h)</text>', svg)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (180, ["0 min", "1 min", "2 min", "3 min"]),
        (60, ["0 s", "15 s", "30 s", "45 s", "60 s"]),
        (90, ["0 s", "20 s", "40 s", "60 s", "80 s"]),
        (600, ["0 min", "2 min", "4 min", "6 min", "8 min", "10 min"]),
        (7 * 60, ["0 min", "2 min", "4 min", "6 min"]),
        (150 * 60, ["0 h", "0.5 h", "1 h", "1.5 h", "2 h", "2.5 h"]),
    ],
)
def test_time_axis_ticks_are_round_numbers(seconds: int, expected: list[str]) -> None:
    from airflow_hetero.plugins.page import time_ticks

    ticks = time_ticks(seconds)
    assert [label for _, label in ticks] == expected
    assert ticks[0][0] == 0 and all(0 <= frac <= 1 for frac, _ in ticks)
    assert all(b > a for (a, _), (b, _) in itertools.pairwise(ticks))


def test_a_three_minute_axis_reads_whole_minutes() -> None:
    svg = chart(series(3), {"cpus": 4, "gpus": 1}, {})  # 3 points of 60 s
    assert labels(svg) == ["0 min", "1 min", "2 min", "3 min"]
    assert "2 min" in svg and svg.count(">2 min<") == 1  # not "0 / 2 / 3 min"


def test_a_failed_jobs_tab_shows_its_reason_and_error_lines() -> None:
    failed = two_groups(status="Failed", failure_reason="AlgorithmError: ExecuteUserScriptError: exit 1 <&>")
    failed["groups"]["train_group"] |= {
        "errors": 2,
        "error_samples": [
            {"host": "algo-3", "time": "2026-11-30T05:01:02.000Z", "line": "Traceback (most recent call last):"},
            {"host": "algo-3", "time": None, "line": "ValueError: bad <input>", "exception": "ValueError: bad <input>"},
        ],
    }
    failed["unmapped"] = {
        "hosts": ["algo-9"],
        "errors": 1,
        "error_samples": [{"host": "algo-9", "time": None, "line": "CUDA error: out of memory"}],
    }
    html = render_page(failed, where="DAG d")
    assert "Failure reason" in html and "AlgorithmError: ExecuteUserScriptError: exit 1 &lt;&amp;&gt;" in html
    assert "ValueError: bad &lt;input&gt;" in html and "Traceback (most recent call last):" in html
    assert "algo-3" in html and "2026-11-30T05:01:02" in html
    assert "CUDA error: out of memory" in html and "algo-9" in html  # hosts no group claims, too
    assert "<input>" not in html
    assert "Failure reason" not in render_page(two_groups(), where="DAG d")
    skeleton = {"training_job_name": "j", "status": "Failed", "failure_reason": "OOM", "groups": {}, "truncated": {}}
    assert "OOM" in render_page(skeleton, where="DAG d")  # the size bound's last resort keeps the reason


def test_the_suggested_count_says_it_counts_instances() -> None:
    summary = two_groups()
    html = render_page(summary, where="DAG d")
    assert "idle (try 1 instance)" in html and "(try 1)" not in html
    summary["verdict"]["groups"]["data_group"] |= {"instance_count": 8, "suggested_count": 3}
    assert "idle (try 3 instances)" in render_page(summary, where="DAG d")
    log = format_verdict(summary["verdict"])  # the task log says it the same way
    assert "[idle (try 3 instances)]" in log and "[waiting]" in log
