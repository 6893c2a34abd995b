"""The Runs page without a server: what the chart draws (stacked costs with the waiting part hatched, the run
length, right-sizing changes, lettered markers), the legend, the table, the pager, escaping and CPU time; the 2.11
blueprint's route; the plugin's Airflow 3 tabs."""

from __future__ import annotations

import re
from html import escape
from typing import Any

import pytest
from support.page_layout import nesting_problems

from airflow_hetero._compat import AIRFLOW_V_3
from airflow_hetero.plugins.page import CSP, render_page
from airflow_hetero.plugins.runs_history import RunHistory, run_history
from airflow_hetero.plugins.runs_model import MARKERS, DecisionRow, GroupRow, Marker, RunRow
from airflow_hetero.plugins.runs_page import CHANGE_COLOURS, MARKER_COLOURS, render_runs_page
from benchmarks.runs_data import retraining_runs

PARAMS = {"dag_id": "hetero_retraining", "task_id": "train", "map_index": "-1"}


def page(history: RunHistory, current_run: str | None = None) -> str:
    return render_runs_page(history, where="DAG hetero_retraining, task train", params=PARAMS, current_run=current_run)


def test_thirty_runs_draw_every_marker_the_changes_and_the_legend() -> None:
    history = run_history("hetero_retraining", "train", retraining_runs(30), has_older=True)
    html = page(history, current_run=history.runs[3].run_id)
    assert nesting_problems(html) == []
    assert html.count("<svg") == 2  # the chart and the legend's hatch swatch
    assert escape(history.headline) in html
    for kind, (letter, name) in MARKERS.items():  # the legend says every marker
        assert f'background:{MARKER_COLOURS[kind]}">{letter}</b>{escape(name)}' in html
    for kind in ("failed", "budget", "capacity", "spot", "queue"):  # the chart draws those of these runs
        assert f'r="7" fill="{MARKER_COLOURS[kind]}"/>' in html
    assert html.count(f'stroke="{CHANGE_COLOURS["changed"]}" stroke-width="2" stroke-dasharray="6 3"') == 1
    assert html.count('fill="url(#w1)"') == 13  # train_group waited in each of the 13 costed runs before the change
    assert len(re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="22" height="[\d.]+" fill="#4c78a8">', html)) == 28
    assert html.count("<circle cx=") >= 28  # the run-length points
    assert 'class="current"' in html and 'fill="#fefcbf"' in html  # the run the page was opened from
    assert "hatched: waiting cost" in html and "run length (right axis)" in html and "right-sizing undone" in html
    assert '<a href="?dag_id=hetero_retraining&amp;task_id=train&amp;map_index=-1&amp;page=2">older runs</a>' in html
    assert "newer runs" not in html
    assert "applied: data_group 2 -&gt; 4: the last 2 runs say grow" in html
    assert "missing: summary cut to its skeleton" in html and "missing: no summary" in html


def test_the_second_page_links_both_ways_and_an_undo_and_a_recommendation_are_drawn_as_such() -> None:
    runs = retraining_runs(8)
    history = run_history("d", "train", runs, page=2, has_older=True)
    history.runs[0].decision = DecisionRow("apply", "undo applied: data_group 4 -> 2: slower", "undone")
    history.runs[1].decision = DecisionRow("recommend", "recommended: data_group 2 -> 4: why", "changed")
    html = page(history)
    assert 'page=3">older runs' in html and 'page=1">newer runs' in html
    assert f'stroke="{CHANGE_COLOURS["undone"]}" stroke-width="2" stroke-dasharray="6 3"' in html
    assert f'stroke="{CHANGE_COLOURS["recommended"]}" stroke-width="2" stroke-dasharray="2 3"' in html
    assert "undo applied: data_group 4 -&gt; 2: slower" in html
    assert "runs 31 to 38, newest first" in html


def test_everything_from_xcom_is_escaped_and_nothing_is_loaded() -> None:
    evil = "<script>alert(1)</script>"
    row = RunRow(
        evil,
        "2026-01-01",
        "success",
        job=evil,
        status=evil,
        cost=0.000014,
        currency="U<S>D",
        groups=[GroupRow(evil, evil, 1, 0.0, None, 10.0, 0.05)],
        verdict=evil,
        decision=DecisionRow("apply", evil, "changed"),
        markers=[Marker("failed", evil)],
        missing=[evil],
    )
    history = RunHistory("d", evil, evil, None, 1, 30, False, [row], evil, [evil])
    html = page(history, current_run=evil)
    assert "<script" not in html and "&lt;script&gt;" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "0.000014 U&lt;S&gt;D" in html  # a tiny cost, not 0
    assert "&lt; 0.0001" in html  # a group's stored 0 of instance time at a price
    assert nesting_problems(html) == []


def test_no_runs_and_runs_without_cost() -> None:
    empty = page(run_history("d", "train", []))
    assert "no runs of this DAG on this page" in empty and "<svg" not in empty
    history = run_history("d", "train", retraining_runs(30)[-2:])  # the first two runs, both costed
    assert ">?</text>" not in page(history)
    history.runs[0].groups, history.runs[0].cost = [], None
    assert page(history).count(">?</text>") == 1  # a run whose cost is unknown says so on its bar


def test_the_instance_groups_page_links_its_tasks_runs() -> None:
    html = render_page(None, where="w", runs_href="/hetero/runs?dag_id=d&task_id=t")
    assert "Runs of this task" not in html  # a task without a summary: the page has no footer link
    summary = {"training_job_name": "j", "status": "Completed", "groups": {}, "truncated": {}}
    linked = render_page(summary, where="w", runs_href="/hetero/runs?dag_id=d&task_id=t&run_id=r")
    assert '<a href="/hetero/runs?dag_id=d&amp;task_id=t&amp;run_id=r">Runs of this task</a>' in linked


def test_blueprint_for_airflow_2_serves_the_runs_page_behind_the_same_guard() -> None:
    from flask import Flask

    from airflow_hetero.plugins.flask_view import create_blueprint
    from airflow_hetero.plugins.runs_view import RunsQuery

    asked: list[RunsQuery] = []
    guarded: list[str] = []

    def runs_reader(query: RunsQuery) -> str:
        asked.append(query)
        return page(run_history(query.dag_id, query.task_id, retraining_runs(3)))

    def guard(view: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            guarded.append(view.__name__)
            return view(*args, **kwargs)

        return wrapped

    app = Flask(__name__)
    app.register_blueprint(create_blueprint(lambda *a: None, guard, runs_reader))
    client = app.test_client()
    answer = client.get("/hetero/runs?dag_id=d&task_id=train&run_id=r%2B1&map_index={MAP_INDEX}&page=2&limit=10")
    assert answer.status_code == 200 and answer.headers["Content-Security-Policy"] == CSP
    assert "Runs of train" in answer.get_data(as_text=True)
    assert asked == [RunsQuery("d", "train", "r+1", -1, 2, 10)] and guarded == ["runs"]
    assert client.get("/hetero/runs?dag_id=d").status_code == 400
    bad = client.get("/hetero/runs?dag_id=d&task_id=t&page=0")
    assert bad.status_code == 400 and "the page is 1" in bad.get_data(as_text=True)
    assert client.get("/hetero/runs?dag_id=d&task_id=t&limit=101").status_code == 400
    ig = client.get("/hetero/instance-groups?dag_id=d&run_id=r&task_id=summarize&map_index=-1")
    assert ig.status_code == 200 and guarded[-1] == "instance_groups"


@pytest.mark.skipif(not AIRFLOW_V_3, reason="Airflow 3's external views (2.11: the blueprint above)")
def test_the_runs_tabs_sit_on_the_task_and_beside_the_instance_groups_tab() -> None:
    from airflow import plugins_manager

    from airflow_hetero.plugins.instance_groups import InstanceGroupsPlugin

    views = {(v["name"], v["destination"]): v for v in InstanceGroupsPlugin.external_views}
    assert set(views) == {("Instance groups", "task_instance"), ("Runs", "task"), ("Runs", "task_instance")}
    assert views[("Runs", "task")]["href"] == "/hetero/runs?dag_id={DAG_ID}&task_id={TASK_ID}"
    assert views[("Runs", "task_instance")]["href"].endswith("&run_id={RUN_ID}&map_index={MAP_INDEX}")
    assert plugins_manager.is_valid_plugin(InstanceGroupsPlugin)
