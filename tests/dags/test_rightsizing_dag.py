"""Right-sizing end to end on the offline endpoint: the wiring, once per Airflow version. A DAG runs on three
successive logical dates (as the scheduler would) under ``dag.test()``, its training task in ``apply`` mode, its
summary recording each run. The test proves what only a real run can: the decision travels from run to run in
XCom, the summary's record is read back as the next run's evidence, and the count the decision chose is the one
the endpoint ran (DescribeTrainingJob). Every decision is checked against :func:`decide` of the evidence the runs
recorded, not against an outcome a loaded machine could change. The policy itself (convergence, shrinking,
noise, resets, undos, moves between types) is tested without Airflow: tests/job/test_rightsizing*.py,
tests/operators/test_rightsizing_records.py.

The evidence is fed so that no machine load can change what it says (tests/support/rightsizing_dag.py has the
script): 1 data host keeps a quarter of a core busy for the whole run, the trainer only sleeps, and the summary
divides the trainer's CPU figure by 1000 vCPUs (``capacity_overrides``). With the verdict's thresholds at 0.5 %
(waiting) and 1 % (busy), the data host is saturated unless it gets less than 1 % of a core, and the trainer
(at most 0.1 % whatever it does) waits: the data group is the bottleneck in every run, the first two runs agree,
and the third run has 2 data hosts (a step at most doubles; objective ``time``, so prices do not weigh it).
"""

from __future__ import annotations

import itertools
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
    dag_module: Any, endpoint: LocalEndpoint
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
