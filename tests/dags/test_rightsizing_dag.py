"""Right-sizing end to end on the offline endpoint: the wiring, once per Airflow version. A DAG runs on three
successive logical dates (as the scheduler would) under ``dag.test()``, its training task in ``apply`` mode, its
summary recording each run. The test proves what only a real run can: the decision travels from run to run in
XCom, the summary's record is read back as the next run's evidence, the count the decision chose is the one the
endpoint ran (DescribeTrainingJob), and the Runs page, read from the metadata database, shows the three runs as
they ran (on Airflow 2.11 drawn by Chromium; on Airflow 3 the system test draws the example DAG's). Every
decision is checked against :func:`decide` of the evidence the runs recorded, not against an outcome a loaded
machine could change. The policy itself (convergence, shrinking, noise, resets, undos, moves between types) is
tested without Airflow: tests/job/test_rightsizing*.py, tests/operators/test_rightsizing_records.py.

The evidence is fed so that no machine load can change what it says (tests/support/rightsizing_dag.py has the
script): 1 data host keeps a quarter of a core busy for the whole run, the trainer only sleeps, and the summary
divides the trainer's CPU figure by 1000 vCPUs (``capacity_overrides``). With the verdict's thresholds at 0.5 %
(waiting) and 1 % (busy), the data host is saturated unless it gets less than 1 % of a core, and the trainer
(at most 0.1 % whatever it does) waits: the data group is the bottleneck in every run, the first two runs agree,
and the third run has 2 data hosts (a step at most doubles; objective ``time``, so prices do not weigh it).
"""

from __future__ import annotations

import itertools
import re
from html import escape
from pathlib import Path
from typing import Any

import pytest
from support.rightsizing_dag import dag_fixtures, dag_text, run_days, trace

from airflow_hetero.definition.rightsizing import RightSizing
from airflow_hetero.job.rightsizing import Decision, decide, record_of_summary
from airflow_hetero.local import LocalEndpoint

pytestmark = pytest.mark.slow

DATA = "data_group"
WIRING = {
    "data_count": 1,
    "prep": 0.3,
    "train": 0.001,
    "batches": 20,
    "objective": "time",
    "thresholds": {"idle_percent": 0.5, "waiting_percent": 0.5, "busy_percent": 1, "target_percent": 20},
    "capacity_overrides": {"ml.c5.xlarge": {"cpus": 1, "gpus": 0}, "ml.g5.xlarge": {"cpus": 1000, "gpus": 1}},
}
DAG_FILE = dag_text({"wiring": WIRING})

endpoint, dag_module = dag_fixtures("rightsizing_dags", DAG_FILE)


def _expected(before: dict[str, Any], now: dict[str, Any]) -> Decision:
    """The decision the evidence implies: :func:`decide` of the previous decision's counts, types and undone counts
    and this run's evidence (the previous history and the previous run's record), with the prices it was given."""
    return decide(
        RightSizing.of(now["policy"]),
        before["counts"],
        now["history"],
        fingerprint=now["fingerprint"],
        prices=now["prices"],
        blocked=before["blocked"],
        types=before["types"],
        facts=now["facts"],
        written_types=now["written_types"],
    )


def test_decisions_travel_in_xcom_and_the_endpoint_runs_the_decided_count(
    dag_module: Any, endpoint: LocalEndpoint, tmp_path: Path
) -> None:
    runs = run_days(dag_module.rightsizing_wiring, 3, endpoint)
    shown = trace(runs)
    print(shown)
    for run in runs:
        decision, record = run["decision"], run["record"]
        # the count and type the decision chose are the ones the endpoint ran
        assert (run["ran"], run["type"]) == (decision["counts"][DATA], "ml.c5.xlarge"), shown
        # the summary recorded this run: its record is the summary it returned, with this decision
        assert record == record_of_summary(run["summary"], decision, decision["run_id"]), shown
        assert record["job_name"] == run["job_name"] and record["outcome"] == "completed", shown
        assert record["fingerprint"] == runs[0]["decision"]["fingerprint"] and record["fallback"] is False, shown
        # the training task's short result says what it decided
        assert run["result"] == {
            "mode": "apply",
            "counts": decision["counts"],
            "recommended": decision["recommended"],
            "actions": {g["group"]: g["action"] for g in decision["groups"]},
            "types": {DATA: "ml.c5.xlarge"},  # no types listed: the type as written
            "recommended_types": {DATA: "ml.c5.xlarge"},
        }, shown
    first = runs[0]["decision"]
    assert first["evidence"] == 0 and first["history"] == [] and first["counts"] == {DATA: 1}, shown
    for before, now in itertools.pairwise(runs):
        decision = now["decision"]
        # XCom across runs: the previous decision's evidence and the summary's record of the previous run
        assert decision["history"] == [*before["decision"]["history"], before["record"]], shown
        assert decision["reset"] is None and decision["evidence"] == len(decision["history"]), shown
        # the decision the evidence implies, and the one the summary announced for this run
        expected = _expected(before["decision"], decision).as_dict()
        assert (decision["counts"], decision["groups"]) == (expected["counts"], expected["groups"]), shown
        assert (decision["counts"], decision["groups"]) == (before["next"]["counts"], before["next"]["groups"]), shown
    # the fed evidence: the data group held the trainer back in both first runs, so they agreed and it grew 1 -> 2
    for run in runs[:2]:
        verdict = run["record"]["verdict"]
        assert verdict["bottleneck"] == DATA and verdict["suggestion"]["group"] == DATA, shown
    assert [r["ran"] for r in runs] == [1, 1, 2], shown
    grown = runs[2]["decision"]
    group = grown["groups"][0]
    assert (group["action"], group["count"], group["next_count"]) == ("changed", 1, 2), shown
    assert group["reason"].startswith("the last 2 runs say grow"), shown
    assert grown["evidence"] == 2 and runs[2]["result"]["actions"] == {DATA: "changed"}, shown
    from airflow_hetero.plugins.page import render_page

    upcoming = runs[-1]["next"]["counts"][DATA]
    page = render_page(runs[-1]["summary"], where="w")
    assert f"Right-sizing (apply, objective time): the next run uses data_group={upcoming}" in page, shown
    the_runs_page_shows_them(dag_module.rightsizing_wiring.dag_id, runs, tmp_path)


def the_runs_page_shows_them(dag_id: str, runs: list[dict[str, Any]], tmp_path: Path) -> None:
    """The Runs page over these runs, read from the metadata database as both servers read it (the page is what
    either's route answers once Airflow let the caller in): each run's job, cluster and cost per group as the runs
    had them, the change line of the third, and the summary line at the top. On Airflow 2.11, Chromium draws it
    (on Airflow 3 the system test opens the api-server's page of the example DAG's runs)."""
    from airflow.utils.session import create_session

    from airflow_hetero._compat import AIRFLOW_V_3
    from airflow_hetero.plugins.runs_history import run_history
    from airflow_hetero.plugins.runs_query import read_runs
    from airflow_hetero.plugins.runs_view import RunsQuery, runs_html

    with create_session() as session:
        found, older = read_runs(session, dag_id, "train", page=1, limit=30)
        html = runs_html(session, RunsQuery(dag_id, "train"))
    history = run_history(dag_id, "train", found, has_older=older)
    rows = list(reversed(history.runs))  # oldest first, as ``runs``
    assert [(row.job, row.status) for row in rows] == [(run["job_name"], "Completed") for run in runs]
    for row, run in zip(rows, runs, strict=True):
        cost = run["summary"]["cost"]
        assert {g.name: g.count for g in row.groups} == {DATA: run["ran"], "train_group": 1}
        assert [(g.name, g.cost) for g in row.groups] == [(n, cost["groups"][n]["cost"]) for n in (DATA, "train_group")]
        assert row.cost == cost["total"] and row.markers == [] and row.missing == []
        assert escape(row.decision.line if row.decision else "-") in html
    assert [row.decision.action if row.decision else None for row in rows] == ["kept", "kept", "changed"]
    assert rows[2].decision is not None and rows[2].decision.line.startswith("applied: data_group 1 -> 2: ")
    said = re.fullmatch(
        r"last 3 runs: cost (±0|[+-][\d.]+) % since data_group went 1 -> 2 on 2026-03-03", history.headline
    )
    assert said, history.headline
    planned = [run["summary"]["cost"]["total"] for run in runs]
    moved = (planned[2] / ((planned[0] + planned[1]) / 2) - 1) * 100
    assert abs((0.0 if said.group(1) == "±0" else float(said.group(1))) - moved) <= 0.5, (history.headline, moved)
    assert f'<div class="headline">{escape(history.headline)}</div>' in html
    if AIRFLOW_V_3:
        return
    from support.page_layout import screenshot
    from support.png import colour_count

    from airflow_hetero.plugins.runs_page import CHANGE_COLOURS, GROUP_COLOURS

    page = tmp_path / "runs.html"
    page.write_text(html, encoding="utf-8")
    _, _, pixels = screenshot(page.as_uri(), tmp_path / "runs.png", (1000, 700))
    drawn = {colour: colour_count(pixels, colour) for colour in (*GROUP_COLOURS[:2], CHANGE_COLOURS["changed"])}
    assert all(count > 100 for count in drawn.values()), drawn
