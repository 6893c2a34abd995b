"""The Instance groups view of a finished summary task, from the api-server, as Chromium lays it out.

The page is fetched over HTTP with a REST token (the address is the one the task's extra link
pushed), parsed for well-formedness, then opened in headless Chromium at a narrow and a wide window:
each chart's legend must sit right under its own chart, at its left edge, above the next chart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.devtools import Browser
from support.page_layout import nesting_problems
from support.png import read_png
from support.system_airflow import Stack

#: The layout, in CSS pixels, of every chart and every legend, in document order.
LAYOUT = """JSON.stringify({
  charts: Array.from(document.querySelectorAll('svg'), e => e.getBoundingClientRect().toJSON()),
  legends: Array.from(document.querySelectorAll('.legend'), e => e.getBoundingClientRect().toJSON()),
  marks: Array.from(document.querySelectorAll('svg'), e => e.innerHTML),
})"""
#: The line colours of the charts (CPU blue, memory green): each must be drawn.
COLOURS = ("#1f77b4", "#2ca02c")
#: Pixels of each line colour the screenshot must hold: at least the two legends' swatches (14 x 3 px
#: each; a 20-s job's series is one point per chart, drawn as a dot, not a line).
MIN_PIXELS = 70
#: How far under its chart a legend may start (CSS pixels).
GAP = 40


def view_path(stack: Stack, run: str) -> str:
    """The view's address, as the summary task's extra link pushed it (read through the REST API)."""
    entry = stack.rest(
        "GET",
        f"/api/v2/dags/system_deferred/dagRuns/{run}/taskInstances/summarize/xcomEntries/_link_InstanceGroupsLink"
        "?deserialize=true",
    )
    path = str(entry["value"])
    assert path.startswith("/hetero/instance-groups?dag_id=system_deferred&"), path
    return path


def misplaced_legends(layout: dict[str, list[dict[str, float]]]) -> list[str]:
    """What is wrong with where the legends sit; empty when each is right under its chart."""
    charts, legends = layout["charts"], layout["legends"]
    if len(legends) != len(charts):
        return [f"{len(charts)} charts but {len(legends)} legends"]
    problems = []
    for index, (chart, legend) in enumerate(zip(charts, legends, strict=True)):
        where = f"chart {index + 1} at {chart['left']:.0f},{chart['top']:.0f}-{chart['bottom']:.0f}"
        if not 0 <= legend["top"] - chart["bottom"] <= GAP:
            problems.append(f"{where}: its legend starts at y={legend['top']:.0f}")
        if abs(legend["left"] - chart["left"]) > 16:
            problems.append(f"{where}: its legend starts at x={legend['left']:.0f}")
        if index + 1 < len(charts) and legend["bottom"] > charts[index + 1]["top"]:
            problems.append(f"{where}: its legend reaches y={legend['bottom']:.0f}, into the next chart")
    lefts = {round(chart["left"]) for chart in charts}
    if len(lefts) > 1:
        problems.append(f"the charts start at different x: {sorted(lefts)}")
    return problems


def colour_pixels(path: Path, colour: str, tolerance: int = 10) -> int:
    """Pixels of the screenshot within ``tolerance`` of ``colour`` in each channel."""
    want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    _, _, rows = read_png(path)
    return sum(1 for row in rows for px in row if all(abs(a - b) <= tolerance for a, b in zip(px, want, strict=True)))


def test_the_instance_groups_view_is_well_formed_and_each_legend_sits_under_its_chart(
    stack: Stack, deferred_runs: tuple[list[str], int]
) -> None:
    run = deferred_runs[0][0]
    path = view_path(stack, run)
    status, html, headers = stack.get_text(path)
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert headers["content-security-policy"].startswith("default-src 'none'")
    assert "data_group" in html and "train_group" in html
    assert html.count("<svg") == 2, "one chart per group"
    problems: dict[str, Any] = {"html": nesting_problems(html)}
    with Browser() as browser:
        for width in (1000, 1920):
            session = browser.open(stack.api_url + path, {"Authorization": f"Bearer {stack.token}"}, width, 1000)
            layout = json.loads(browser.evaluate(session, LAYOUT))
            found = misplaced_legends(layout)
            marks = enumerate(layout["marks"], 1)
            found += [f"chart {i} draws no {colour}" for i, svg in marks for colour in COLOURS if colour not in svg]
            shot = browser.screenshot(session, stack.root / "logs" / f"instance-groups-{width}.png")
            assert read_png(shot)[0] == width
            drawn = {colour: colour_pixels(shot, colour) for colour in COLOURS}
            found += [f"{colour}: {count} pixels" for colour, count in drawn.items() if count < MIN_PIXELS]
            problems[f"{width}px"] = found
    assert all(not found for found in problems.values()), problems
