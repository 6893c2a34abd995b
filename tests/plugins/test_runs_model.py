"""The runs' data model (no Airflow): which tasks pair up, each run's row from hand-made XComs (cost per group,
length, cluster, the right-sizing line, every marker, what is missing), and the headline over a page."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_hetero.plugins.run_rows import decision_row, duration_text, run_row
from airflow_hetero.plugins.runs_history import cluster_change, headline, run_history
from airflow_hetero.plugins.runs_model import (
    RunXComs,
    TaskPair,
    checked_limit,
    checked_page,
    pair_tasks,
    runs_from_rows,
)
from benchmarks.runs_data import CAPACITY_ERROR, retraining_runs

PAIR = TaskPair("train", "summarize")
GROUPS = [
    {"name": "data_group", "type": "ml.c5.xlarge", "count": 2},
    {"name": "train_group", "type": "ml.g5.xlarge", "count": 1},
]


def result(job: str = "job-1", **more: Any) -> dict[str, Any]:
    """The training task's result dict, as job/outcome.py's result_dict makes it."""
    return {
        "training_job_name": job,
        "status": "Completed",
        "secondary_status": "Completed",
        "failure_reason": None,
        "instance_groups": GROUPS,
        "billable_seconds": 600,
        "training_seconds": 600,
        **more,
    }


def cost(spot: bool = False) -> dict[str, Any]:
    groups = {
        "data_group": {
            "instance_type": "ml.c5.xlarge",
            "instance_count": 2,
            "instance_seconds": 1200.0,
            "price_per_hour": 0.204,
            "cost": 0.068,
            "waiting_instance_seconds": 0.0,
            "waiting_cost": 0.0,
        },
        "train_group": {
            "instance_type": "ml.g5.xlarge",
            "instance_count": 1,
            "instance_seconds": 600.0,
            "price_per_hour": 1.408,
            "cost": 0.2347,
            "waiting_instance_seconds": 300.0,
            "waiting_cost": 0.1173,
        },
    }
    out: dict[str, Any] = {
        "currency": "USD",
        "total": 0.3027,
        "waiting": 0.1173,
        "groups": groups,
        "prices": {},
        "estimate": spot,
        "spot": {"billable_seconds": 180, "training_seconds": 600, "ratio": 0.3} if spot else None,
        "notes": [],
    }
    if spot:
        out["spot_saving"] = 0.7063
    return out


def summary(job: str = "job-1", **more: Any) -> dict[str, Any]:
    """A whole summary (the parts the view reads)."""
    return {
        "training_job_name": job,
        "status": "Completed",
        "secondary_status": "Completed",
        "failure_reason": None,
        "partial": False,
        "groups": {
            "data_group": {"instance_type": "ml.c5.xlarge", "instance_count": 2},
            "train_group": {"instance_type": "ml.g5.xlarge", "instance_count": 1},
        },
        "unmapped": None,
        "truncated": {},
        "verdict": {
            "kind": "bottleneck",
            "bottleneck": "data_group",
            "message": "data_group is the bottleneck; try 4 data_group instances",
            "suggestion": None,
            "groups": {},
            "idle_groups": [],
            "over_provisioned_groups": [],
            "notes": [],
            "thresholds": {},
            "instance_seconds": None,
            "waiting_instance_seconds": None,
            "waiting_share": None,
        },
        "cost": cost(),
        **more,
    }


def run(values: dict[tuple[str, str], Any], state: str = "success", run_id: str = "r1") -> RunXComs:
    return RunXComs(run_id, "2026-11-22T00:00:00+00:00", state, values)


def decision(action: str, count: int, next_count: int, mode: str = "apply", **more: Any) -> dict[str, Any]:
    group = {"group": "data_group", "action": action, "count": count, "next_count": next_count, "reason": "why", **more}
    return {"mode": mode, "counts": {"data_group": next_count}, "evidence": 2, "groups": [group]}


def test_runs_from_rows_keeps_the_order_and_a_run_without_xcoms() -> None:
    rows = [("r2", "train", "training_job_name", "j2"), ("r1", "train", "training_job_name", "j1")]
    runs = runs_from_rows([("r2", "2026-02-01", "success"), ("r1", None, "failed"), ("r0", None, None)], rows)
    assert [r.run_id for r in runs] == ["r2", "r1", "r0"]
    assert runs[0].values == {("train", "training_job_name"): "j2"} and runs[2].values == {}


def test_either_task_finds_its_partner_among_several_pairs() -> None:
    runs = [
        run(
            {
                ("train", "training_job_name"): "a-1",
                ("summarize", "return_value"): summary("a-1"),
                ("train_b", "training_job_name"): "b-1",
                ("summarize_b", "return_value"): summary("b-1"),
                ("gate", "return_value"): {"training_job_name": "a-1"},  # returns a dict, but no summary
            }
        )
    ]
    assert pair_tasks(runs, "train") == TaskPair("train", "summarize")
    assert pair_tasks(runs, "summarize_b") == TaskPair("train_b", "summarize_b")
    assert pair_tasks(runs, "week") == TaskPair("week", None)  # pushed nothing of ours: taken for a training task
    only_keys = [run({("train", "training_job_name"): "a-1", ("summarize", "verdict"): {"kind": "x"}})]
    assert pair_tasks(only_keys, "summarize") == TaskPair("train", "summarize")  # no name to match: the one beside


def test_a_whole_run_row() -> None:
    values = {
        ("train", "training_job_name"): "job-1",
        ("train", "return_value"): result(),
        ("train", "rightsizing"): decision("changed", 1, 2, figures={"cost_per_run": 0.3}),
        ("summarize", "return_value"): summary(),
    }
    row = run_row(run(values), PAIR)
    assert (row.job, row.status, row.seconds, row.currency, row.cost, row.waiting_cost) == (
        "job-1",
        "Completed",
        600.0,
        "USD",
        0.3027,
        0.1173,
    )
    assert [(g.name, g.count, g.type, g.cost, g.waiting_cost) for g in row.groups] == [
        ("data_group", 2, "ml.c5.xlarge", 0.068, 0.0),
        ("train_group", 1, "ml.g5.xlarge", 0.2347, 0.1173),
    ]
    assert (
        row.verdict == "data_group is the bottleneck; try 4 data_group instances" and row.verdict_kind == "bottleneck"
    )
    assert row.decision is not None and row.decision.line == "applied: data_group 1 -> 2: why"
    assert row.markers == [] and row.missing == []
    assert row.as_dict()["groups"][0]["name"] == "data_group"


@pytest.mark.parametrize(
    ("kept", "line", "moved", "undo"),
    [
        (decision("changed", 2, 4), "applied: data_group 2 -> 4: why", True, False),
        (decision("changed", 2, 4, mode="recommend"), "recommended: data_group 2 -> 4: why", True, False),
        (decision("undone", 4, 2), "undo applied: data_group 4 -> 2: why", True, True),
        (
            decision("changed", 1, 1, type="ml.c5.xlarge", next_type="ml.c5.2xlarge"),
            "applied: data_group 1 x ml.c5.xlarge -> 1 x ml.c5.2xlarge: why",
            True,
            False,
        ),
        (decision("refused_budget", 2, 2), "apply: data_group held at 2: why", False, False),
        (decision("kept", 2, 2), "apply: kept data_group=2 (2 run(s) of evidence)", False, False),
        (
            {
                "mode": "apply",
                "counts": {"data_group": 4},
                "recommended": {"data_group": 4},
                "actions": {"data_group": "changed"},
            },
            "applied: data_group -> 4",
            True,
            False,
        ),
        (
            {"mode": "apply", "recommended": {"data_group": 2}, "actions": {"data_group": "undone"}},
            "undo applied: data_group -> 2",
            True,
            True,
        ),
    ],
)
def test_the_decision_in_one_line(kept: dict[str, Any], line: str, moved: bool, undo: bool) -> None:
    said = decision_row(kept)
    assert (said.line, said.moved, said.undo) == (line, moved, undo)


def test_a_capacity_fallback_says_which_cluster_ran() -> None:
    ran = [GROUPS[0], {"name": "train_group", "type": "ml.g5.2xlarge", "count": 1}]
    attempt = {"job_name": "job-1", "instance_groups": [{**g} for g in GROUPS], "reason": CAPACITY_ERROR}
    values = {
        ("train", "capacity_attempts"): [attempt],
        ("train", "return_value"): result("job-1-1", instance_groups=ran, capacity_attempts=[attempt]),
    }
    row = run_row(run(values), PAIR)
    assert row.fallback
    (marker,) = row.markers
    assert marker.kind == "capacity" and marker.text == (
        "capacity fallback: train_group fell back ml.g5.xlarge -> ml.g5.2xlarge (1 attempt failed: CapacityError); "
        "ran data_group=2 x ml.c5.xlarge, train_group=1 x ml.g5.2xlarge"
    )
    exhausted = run_row(run({("train", "capacity_attempts"): [attempt, attempt]}, state="failed"), PAIR)
    assert [m.text for m in exhausted.markers] == [
        "failed: the training task ended without a result",
        "capacity: no cluster ran (2 attempts failed: CapacityError, CapacityError)",
    ]


def test_a_budget_stop_a_limit_stop_and_a_failure() -> None:
    stopped = summary(status="Stopped", secondary_status="MaxRuntimeExceeded")
    budget = {
        ("train", "training_job_name"): "job-1",
        ("train", "budget_stop"): {"job_name": "job-1", "message": "ended at the cap of 300 s"},
        ("summarize", "return_value"): stopped,
    }
    row = run_row(run(budget, state="failed"), PAIR)
    assert [(m.kind, m.text) for m in row.markers] == [("budget", "budget stop: ended at the cap of 300 s")]
    assert row.missing == ["no result from the training task (it failed, or still runs)"]
    del budget[("train", "budget_stop")]
    assert [m.kind for m in run_row(run(budget, state="failed"), PAIR).markers] == ["limit"]
    failed = {("summarize", "return_value"): summary(status="Failed", failure_reason="AlgorithmError: exit 1")}
    assert [m.text for m in run_row(run(failed), PAIR).markers] == ["failed: AlgorithmError: exit 1"]


def test_spot_and_queue_markers() -> None:
    timeline = [{"status": s} for s in ("Starting", "Training", "Interrupted", "Training", "Interrupted", "Training")]
    queue = {
        "service_job": "job-1",
        "job_id": "id",
        "job_queue": "gpu-queue",
        "currency": "USD",
        "attempts": [
            {"training_job": "a", "status": "Failed", "billable_seconds": 30, "cost": 0.01},
            {"training_job": "job-1", "status": "Completed", "billable_seconds": 600, "cost": 0.3027},
        ],
        "earlier_cost": 0.01,
        "total": 0.3127,
    }
    service = {
        "job_queue": "arn:aws:batch:us-east-1:1:job-queue/gpu-queue",
        "attempts": ["a", "job-1"],
        "queued_seconds": 250.0,
    }
    values = {
        ("train", "return_value"): result(service_job=service),
        ("summarize", "return_value"): summary(cost=cost(spot=True), timeline=timeline, queue_attempts=queue),
    }
    row = run_row(run(values), PAIR)
    assert [m.text for m in row.markers] == [
        "spot: saved 70 % (0.7063 USD), 2 interruptions",
        "queue gpu-queue: waited 4 min 10 s, 2 attempts, all attempts 0.3127 USD",
    ]
    assert (row.spot_saving, row.queued_seconds, row.queue_attempts) == (0.7063, 250.0, 2)


def test_what_a_run_lacks_is_said_and_the_rest_shown() -> None:
    no_summary = run_row(run({("train", "return_value"): result()}), PAIR)
    assert no_summary.missing == ["no summary (the summary task did not run, or pushed none)"]
    assert [g.count for g in no_summary.groups] == [2, 1] and no_summary.cost is None and no_summary.seconds == 600
    skeleton = {"training_job_name": "job-1", "status": "Completed", "groups": {"data_group": {"instance_count": 2}}}
    cut = run_row(run({("summarize", "return_value"): skeleton}), PAIR)
    assert cut.missing == [
        "no result from the training task (it failed, or still runs)",  # the job's name is the summary's
        "summary cut to its skeleton to fit max_xcom_bytes: no cost, no verdict",
    ]
    assert [(g.name, g.count, g.type) for g in cut.groups] == [("data_group", 2, None)]
    headline_only = summary(cost={"currency": "USD", "total": 0.3, "waiting": 0.1})
    row = run_row(run({("train", "return_value"): result(), ("summarize", "return_value"): headline_only}), PAIR)
    assert row.missing == ["cost per group cut to fit max_xcom_bytes: the total only"] and row.cost == 0.3
    priceless = summary()
    del priceless["cost"]
    assert run_row(
        run({("train", "return_value"): result(), ("summarize", "return_value"): priceless}), PAIR
    ).missing == ["no cost in the summary (no price for its instance types)"]
    keys_only = {("summarize", "cost"): cost(), ("summarize", "verdict"): summary()["verdict"]}
    from_keys = run_row(run(keys_only), PAIR)  # an older summary's separate keys still give the cost and verdict
    assert from_keys.cost == 0.3027 and from_keys.verdict is not None
    nothing = run_row(run({"oops": 1}, state="running"), PAIR)  # type: ignore[dict-item]
    assert nothing.markers == [] and nothing.groups == []


def test_the_headline_over_a_page() -> None:
    history = run_history("hetero_retraining", "train", retraining_runs(30))
    assert history.headline == (
        "last 30 runs: cost -26 % since data_group went 2 -> 4 on 2026-09-20; 4 capacity fallbacks; 1 budget stop; "
        "1 failed; spot saved 70 %; 5 queued (wait 4 min median, 5 retried attempts); 1 without a summary"
    )
    assert (history.training_task, history.summary_task, history.notes) == ("train", "summarize", [])
    eight = run_history("hetero_retraining", "summarize", retraining_runs(30)[:8], page=1)
    assert eight.headline.startswith(
        "last 8 runs: cost 0.2039 USD per run (median), ±0 % from the first run to the last"
    )
    older = run_history("hetero_retraining", "train", retraining_runs(30)[8:], page=2)
    assert older.headline.startswith("older 22 runs: cost -36 % since data_group went 2 -> 4")
    assert headline([]) == "no runs"
    alone = run_history("d", "train", [run({("train", "training_job_name"): "j"})])
    assert alone.headline == "last 1 run: nothing to compare yet"
    assert alone.notes[0].startswith("no summary task of train found")
    assert run_history("d", "train", []).notes == ["no runs of this DAG on this page"]


def test_a_cluster_change_ignores_fallback_runs() -> None:
    oldest_first = list(reversed(run_history("d", "train", retraining_runs(8)).runs))
    index, what = cluster_change(oldest_first) or (None, None)
    assert (index, what) == (4, "data_group went 2 -> 4")  # run 3's fallback to ml.g5.2xlarge is no change


def week_run(day: int, data_count: int, train_type: str, total: float, fell_back: bool = False) -> RunXComs:
    """A run of the week starting on 2026-01-``day``: its cluster, its cost, and whether it fell back."""
    groups = [{**GROUPS[0], "count": data_count}, {**GROUPS[1], "type": train_type}]
    attempts = [{"job_name": "j-0", "reason": CAPACITY_ERROR, "instance_groups": GROUPS}] if fell_back else []
    values = {
        ("train", "return_value"): result(f"j-{day}", instance_groups=groups),
        ("train", "capacity_attempts"): attempts,
        ("summarize", "return_value"): summary(f"j-{day}", cost={**cost(), "total": total}),
    }
    return RunXComs(f"r{day}", f"2026-01-{day:02d}T00:00:00+00:00", "success", values)


def test_the_cost_since_a_change_compares_only_runs_on_the_cluster_planned() -> None:
    """The system test's runs of the example DAG: the first fell back to a dearer type, the second ran the cluster
    planned, the third had its data group grown. The change made a run dearer; the fallback run's dearer type is no
    effect of it, so it counts on neither side (it once made the headline say ``cost -50 %``)."""
    newest_first = [
        week_run(18, 4, "ml.g5.xlarge", 0.0002),
        week_run(11, 2, "ml.g5.xlarge", 0.0001),
        week_run(4, 2, "ml.g5.2xlarge", 0.0007, fell_back=True),
    ]
    history = run_history("system_retraining", "train", newest_first)
    assert [row.fallback for row in history.runs] == [False, False, True]
    assert history.headline == (
        "last 3 runs: cost +100 % since data_group went 2 -> 4 on 2026-01-18; 1 capacity fallback"
    )
    after_fallback = [week_run(25, 4, "ml.g5.2xlarge", 0.0009, fell_back=True), *newest_first]
    assert run_history("d", "train", after_fallback).headline.startswith("last 4 runs: cost +100 % since data_group")


def test_limits_and_durations() -> None:
    assert checked_limit(30) == 30 and checked_page(2) == 2
    for bad in (0, 101):
        with pytest.raises(ValueError, match="1 to 100"):
            checked_limit(bad)
    with pytest.raises(ValueError, match="1 \\(the newest runs\\)"):
        checked_page(0)
    assert [duration_text(s) for s in (4.5, 45, 250, 3600, 7500)] == [
        "4.5 s",
        "45 s",
        "4 min 10 s",
        "60 min",
        "2 h 5 min",
    ]
