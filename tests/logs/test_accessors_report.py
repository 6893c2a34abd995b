"""The summary's typed accessors (logs/accessors.py) and its one report (logs/report.py): a summary read
back from XCom, whole, cut, a skeleton, older or malformed, reads without casts and never crashes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from airflow_hetero.logs.accessors import (
    capacity_attempts_of,
    cost_of,
    error_samples_of,
    groups_of,
    is_log_summary,
    is_skeleton,
    metrics_of,
    problems_of,
    queue_attempts_of,
    series_of,
    truncated_of,
    unmapped_of,
    utilization_of,
    verdict_of,
)
from airflow_hetero.logs.per_group import CostSpec, SeriesSpec, VerdictSpec, build_summary
from airflow_hetero.logs.report import NO_VERDICT, NO_VERDICT_SKELETON, format_report
from airflow_hetero.logs.size_limit import enforce_size_limit
from airflow_hetero.logs.table import TABLE_WIDTH, format_table
from airflow_hetero.logs.verdict import Thresholds, format_verdict
from airflow_hetero.pricing.price_list import Price
from tests.logs.test_summary import DESCRIBE, START, make_logs

PRICES = {
    "ml.c5.18xlarge": Price("ml.c5.18xlarge", 3.672, "USD", "pricing_api", "$3.672 per hour"),
    "ml.p4d.24xlarge": Price("ml.p4d.24xlarge", 37.688, "USD", "override"),
}


def whole_summary() -> dict[str, Any]:
    """A summary with everything: groups, series, verdict and cost, as JSON (what XCom gives back)."""
    at = START.timestamp() + 60
    datapoints = {h: {"CPUUtilization": [(at, 6500.0, 7000.0)]} for h in ("algo-2", "algo-3")}
    datapoints["algo-1"] = {"GPUUtilization": [(at, 160.0, 200.0)], "MemoryUtilization": [(at, 95.0, 97.0)]}
    summary = build_summary(
        "job",
        DESCRIBE,
        make_logs(errors=1),
        datapoints=datapoints,
        series=SeriesSpec(4, (START.timestamp(), START.timestamp() + 240)),
        verdict=VerdictSpec(Thresholds()),
        cost=CostSpec(PRICES),
    )
    return json.loads(json.dumps(summary))


def test_a_whole_summary_reads_whole_through_every_accessor() -> None:
    summary = whole_summary()
    assert is_log_summary(summary)  # the checks agree with what build_summary makes
    verdict, cost = verdict_of(summary), cost_of(summary)
    assert verdict is not None and "groups" in verdict and verdict == summary["verdict"]
    assert cost is not None and "groups" in cost and cost == summary["cost"]
    groups = groups_of(summary)
    assert list(groups) == ["data", "dnn"] and not is_skeleton(summary)
    assert utilization_of(groups["data"]) == summary["groups"]["data"]["utilization"]
    assert series_of(groups["dnn"]) == summary["groups"]["dnn"]["series"]
    assert metrics_of(groups["dnn"])["train:loss"]["count"] > 0
    assert error_samples_of(groups["data"]) == summary["groups"]["data"]["error_samples"] != []
    assert problems_of(summary) == summary["problems"] and truncated_of(summary) == {}


def test_every_cut_of_the_size_bound_reads_and_reports() -> None:
    """Each bound cuts a little more: every result is a whole summary or a skeleton, and reports."""
    summary = whole_summary()
    for group in summary["groups"].values():
        group["tail"] = {h: ["x" * 3000] * 20 for h in group["hosts"]}
    headlines = 0
    for bound in range(2500, 8000, 100):
        cut = json.loads(json.dumps(enforce_size_limit(summary, bound)))
        assert is_log_summary(cut) or is_skeleton(cut), bound
        verdict = verdict_of(cut)
        if verdict is not None and "groups" not in verdict:
            headlines += 1
            assert verdict["message"] == summary["verdict"]["message"]
            assert "instance time spent waiting: 33%" in format_report(cut)  # the headline keeps the share
        format_report(cut)
    assert headlines


def test_a_cost_cut_to_its_headline_reads_and_reports() -> None:
    summary = whole_summary()
    summary["cost"] = {"currency": "USD", "total": 8.2559, "waiting": 6.9095}
    cost = cost_of(summary)
    assert cost is not None and "groups" not in cost and is_log_summary(summary)
    assert "cost: 8.2559 USD in all, waiting 6.9095 USD (details cut to fit max_xcom_bytes)" in format_report(summary)


def test_a_headline_verdict_with_its_waiting_share_formats() -> None:
    """A headline keeps the share but not the seconds: said as a share (it raised KeyError before)."""
    text = format_verdict({"kind": "bottleneck", "message": "m", "waiting_share": 0.4})
    assert text.splitlines() == ["Verdict: m", "  instance time spent waiting: 40%"]


@pytest.mark.parametrize("missing", ["verdict", "cost"])
def test_an_older_summary_without_the_verdict_or_the_cost_reads_as_none(missing: str) -> None:
    summary = whole_summary()
    del summary[missing]
    assert (verdict_of(summary) if missing == "verdict" else cost_of(summary)) is None
    report = format_report(summary)
    assert report.startswith("Training job job: Completed")
    assert (NO_VERDICT in report.splitlines()) == (missing == "verdict")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("verdict", "bottleneck"),
        ("verdict", {"kind": "bottleneck", "message": 3}),
        ("verdict", {"message": "m", "groups": {"a": {"busy_percent": 3}}}),  # no state, no notes...
        ("cost", {"total": 1.0}),  # no currency
        ("cost", {"currency": "USD", "groups": {}, "total": None}),  # whole, but without prices or notes
        ("cost", ["USD", 1.0]),
    ],
)
def test_a_malformed_verdict_or_cost_reads_as_none(key: str, value: Any) -> None:
    summary = whole_summary()
    summary[key] = value
    assert (verdict_of(summary) if key == "verdict" else cost_of(summary)) is None
    assert not is_log_summary(summary)
    format_report(summary)  # no crash: the table and "Verdict: none"


def test_malformed_parts_of_a_group_read_as_none_and_the_group_still_shows() -> None:
    summary = whole_summary()
    data = summary["groups"]["data"]
    data.update(utilization={"cpu": "busy"}, series=[1, 2], metrics={"loss": {"last": "x"}}, error_samples=[3])
    data.pop("mapped_by")  # an older summary's group
    summary["groups"]["odd"] = "not a group"
    assert list(groups_of(summary)) == ["data", "dnn"]
    group = groups_of(summary)["data"]
    assert utilization_of(group) is None and series_of(group) is None
    assert metrics_of(group) == {} and error_samples_of(group) == []
    rows = [line.split() for line in format_table(summary).splitlines()]
    assert rows[2][:3] == ["data", "ml.c5.18xlarge", "2"]


def test_a_skeleton_reads_as_a_skeleton() -> None:
    skeleton = {
        "training_job_name": "j",
        "status": "Failed",
        "groups": {"g": {"instance_count": 2, "errors": 4}},
        "truncated": {"other": ["everything but the job's status and counts"]},
    }
    assert is_skeleton(skeleton) and verdict_of(skeleton) is None and cost_of(skeleton) is None
    assert unmapped_of(skeleton) is None and problems_of(skeleton) == []
    report = format_report(skeleton).splitlines()
    assert report[-1] == NO_VERDICT_SKELETON
    assert report[2].split()[:3] == ["g", "?", "2"]


def test_not_a_summary_at_all_reads_empty() -> None:
    for value in ({}, {"groups": [1], "problems": "x", "truncated": 3, "verdict": None, "unmapped": 1}):
        assert groups_of(value) == {} and problems_of(value) == [] and truncated_of(value) == {}
        assert verdict_of(value) is None and cost_of(value) is None and unmapped_of(value) is None


def test_the_report_is_the_table_then_the_verdict_every_line_within_the_width() -> None:
    summary = whole_summary()
    summary["groups"]["data"]["instance_type"] = "ml.c5.18xlarge\x1b[31m"  # a name with a terminal escape
    report = format_report(summary)
    table = format_table(summary)
    assert report.startswith(table + "\nVerdict: ")
    verdict = report[len(table) + 1 :].splitlines()
    assert max(len(line) for line in report.splitlines()) <= TABLE_WIDTH
    assert " ".join(line.strip() for line in verdict) == " ".join(
        line.strip() for line in format_verdict(summary["verdict"]).splitlines()
    )  # the verdict's words, wrapped
    assert "\x1b" not in report


def test_the_accessors_do_not_change_the_summary() -> None:
    summary = whole_summary()
    before = copy.deepcopy(summary)
    format_report(summary)
    assert summary == before


def attempt(reason: str, dnn: tuple[str, int], job_name: str | None = "job-first") -> dict[str, Any]:
    groups = [{"name": "data", "type": "ml.c5.18xlarge", "count": 2}, {"name": "dnn", "type": dnn[0], "count": dnn[1]}]
    return {"job_name": job_name, "instance_groups": groups, "reason": reason}


def test_a_summary_after_a_capacity_fallback_reads_and_reports_one_capacity_line() -> None:
    summary = whole_summary()  # its dnn group ran on 1 x ml.p4d.24xlarge
    summary["capacity_attempts"] = [
        attempt("CapacityError: Unable to provision requested ML compute capacity.", ("ml.p5.48xlarge", 1)),
        attempt("ResourceLimitExceeded: The account-level service limit ...", ("ml.g5.48xlarge", 1), None),
    ]
    assert is_log_summary(summary) and capacity_attempts_of(summary) == summary["capacity_attempts"]
    report = format_report(summary)
    table = format_table(summary)
    capacity = "Capacity: dnn fell back ml.p5.48xlarge -> ml.p4d.24xlarge (2 attempts failed: CapacityError,"
    assert report.startswith(f"{table}\n{capacity}\n  ResourceLimitExceeded)\nVerdict: ")  # wrapped at 100
    summary["capacity_attempts"][0]["instance_groups"][1]["count"] = 2  # 2 x p5 -> 1 x p4d
    assert "dnn fell back 2 x ml.p5.48xlarge -> 1 x ml.p4d.24xlarge (" in format_report(summary)
    summary["capacity_attempts"] = [attempt("CapacityError", ("ml.p4d", 1)), {"job_name": 3}]
    assert not is_log_summary(summary)  # a malformed attempt: the accessor leaves it out
    assert capacity_attempts_of(summary) == summary["capacity_attempts"][:1]
    for none in ([], None, "x"):
        summary["capacity_attempts"] = none
        assert capacity_attempts_of(summary) == [] and "Capacity:" not in format_report(summary)


def queue(earlier: float | None, latest: float | None) -> dict[str, Any]:
    attempts: list[dict[str, Any]] = [
        {"training_job": "AWSBatchjob-a1", "status": "Failed", "billable_seconds": 600, "cost": earlier},
        {"training_job": "job", "status": "Completed", "billable_seconds": 900, "cost": latest},
    ]
    if earlier is None:
        attempts[0]["reason"] = "no price for ml.p5.48xlarge"
    total = None if earlier is None or latest is None else earlier + latest
    return {
        "service_job": "job",
        "job_id": "id-1",
        "job_queue": "gpu-queue",
        "currency": "USD",
        "attempts": attempts,
        "earlier_cost": earlier,
        "total": total,
    }


def test_a_queued_summary_reads_and_reports_one_queue_line() -> None:
    summary = whole_summary()
    summary["queue_attempts"] = queue(1.5, 2.25)
    assert is_log_summary(summary) and queue_attempts_of(summary) == summary["queue_attempts"]
    report = format_report(summary)
    line = "Queue: service job job (id-1) in gpu-queue, 2 attempts; earlier attempts cost 1.5 USD, all attempts"
    assert report.startswith(f"{format_table(summary)}\n{line}\n  3.75 USD\nVerdict: ")  # wrapped at the width
    assert all(len(row) <= TABLE_WIDTH for row in report.splitlines())
    summary["queue_attempts"] = queue(None, 2.25)  # an earlier attempt has no price: the sums are unknown
    assert is_log_summary(summary)
    joined = " ".join(row.strip() for row in format_report(summary).splitlines())
    assert "2 attempts; earlier attempts cost unknown, all attempts unknown Verdict: " in joined
    summary["queue_attempts"] = {**queue(1.5, 2.25), "attempts": [{"training_job": 3}]}
    assert not is_log_summary(summary) and queue_attempts_of(summary) is None  # malformed: left out
    assert "Queue:" not in format_report(summary)
    for none in (None, "x", {}):
        summary["queue_attempts"] = none
        assert queue_attempts_of(summary) is None and "Queue:" not in format_report(summary)
    del summary["queue_attempts"]
    assert is_log_summary(summary) and "Queue:" not in format_report(summary)
