"""Pure tests of airflow_hetero.logs.per_group and summary_limits: job part, utilisation, size bound, table."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_hetero.logs.patterns import LineRules
from airflow_hetero.logs.per_group import (
    aggregate_utilization,
    build_summary,
    instance_seconds,
    job_overview,
    natural_key,
)
from airflow_hetero.logs.shape import UTILIZATION_METRICS
from airflow_hetero.logs.size_limit import MIN_MAX_XCOM_BYTES, enforce_size_limit, json_size
from airflow_hetero.logs.streams import StreamLog
from airflow_hetero.logs.table import format_table
from airflow_hetero.runtime import format_marker

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T0 = int(START.timestamp() * 1000)

DESCRIBE = {
    "TrainingJobName": "job",
    "TrainingJobStatus": "Completed",
    "SecondaryStatus": "Completed",
    "ResourceConfig": {
        "InstanceGroups": [
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
            {"InstanceGroupName": "dnn", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
        ]
    },
    "TrainingStartTime": START,
    "TrainingEndTime": START + timedelta(minutes=10),
    "BillableTimeInSeconds": 660,
    "TrainingTimeInSeconds": 600,
    "SecondaryStatusTransitions": [
        {
            "Status": "Starting",
            "StartTime": START - timedelta(minutes=2),
            "EndTime": START,
            "StatusMessage": "s",
        },
        {
            "Status": "Training",
            "StartTime": START,
            "EndTime": START + timedelta(minutes=10),
            "StatusMessage": "t",
        },
        {"Status": "Completed", "StartTime": START + timedelta(minutes=10), "StatusMessage": "done"},
    ],
}


def make_logs(lines_per_host: int = 5, errors: int = 0) -> list[StreamLog]:
    rules = LineRules.build(metric_definitions=[{"Name": "train:loss", "Regex": r"loss=([0-9.]+)"}])
    logs = []
    for host, group in (("algo-2", "data"), ("algo-3", "data"), ("algo-1", "dnn")):
        log = StreamLog(f"job/{host}-1767268800", host, rules)
        log.add(T0, format_marker(host, group, "ml.x"))
        for i in range(lines_per_host):
            log.add(T0 + 1 + i, f"{host} step {i} loss={1.0 / (i + 1):.3f} " + "pad" * 20)
        for i in range(errors):
            log.add(T0 + 1000 + i, f"ERROR {host} failure number {i} " + "e" * 200)
        logs.append(log)
    return logs


def test_job_overview_timeline_and_seconds() -> None:
    part = job_overview(DESCRIBE)
    assert part["status"] == "Completed" and part["partial"] is False
    assert [(t["status"], t["seconds"]) for t in part["timeline"]] == [
        ("Starting", 120.0),
        ("Training", 600.0),
        ("Completed", None),
    ]
    assert part["billable_seconds"] == 660 and part["training_seconds"] == 600
    assert part["training_window"] == {
        "start": "2026-01-01T12:00:00.000Z",
        "end": "2026-01-01T12:10:00.000Z",
        "seconds": 600.0,
    }


def test_job_overview_running_job_has_ongoing_step() -> None:
    running = {
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "TrainingStartTime": START,
        "SecondaryStatusTransitions": [{"Status": "Training", "StartTime": START}],
    }
    part = job_overview(running, now=START + timedelta(seconds=90))
    assert part["partial"] is True
    assert part["timeline"][0]["ongoing"] is True and part["timeline"][0]["seconds"] == 90.0
    assert part["training_window"]["seconds"] == 90.0


def test_instance_seconds_prefers_billable_time() -> None:
    assert instance_seconds(2, DESCRIBE) == 1320.0
    assert instance_seconds(2, {"TrainingTimeInSeconds": 10}) == 20.0
    window_only = {"TrainingJobStatus": "InProgress", "TrainingStartTime": START}
    assert instance_seconds(3, window_only, now=START + timedelta(seconds=10)) == 30.0
    assert instance_seconds(3, {}) is None


def test_aggregate_utilization_over_hosts_and_window() -> None:
    s = START.timestamp()
    data = {
        "algo-1": {"CPUUtilization": [(s, 10.0, 20.0), (s + 60, 30.0, 90.0), (s + 3600, 99.0, 99.0)]},
        "algo-2": {"CPUUtilization": [(s, 50.0, 55.0)], "GPUUtilization": [(s, 5.0, None)]},
        "algo-9": {"CPUUtilization": [(s, 100.0, 100.0)]},
    }
    util = aggregate_utilization(["algo-1", "algo-2"], data, (s, s + 600))
    assert util["cpu"] == {"avg": 30.0, "max": 90.0, "hosts": 2, "datapoints": 3}
    assert util["gpu"] == {"avg": 5.0, "max": 5.0, "hosts": 1, "datapoints": 1}
    assert util["memory"] is None and util["gpu_memory"] is None
    assert aggregate_utilization(["algo-1"], data)["cpu"]["max"] == 99.0  # no window: everything


def test_build_summary_shape_is_json_and_merges_metrics() -> None:
    summary = build_summary("job", DESCRIBE, make_logs(errors=2), tail_lines=3, datapoints={})
    json.dumps(summary)
    assert set(summary["groups"]) == {"data", "dnn"}
    data = summary["groups"]["data"]
    for key in (
        "instance_type",
        "instance_count",
        "hosts",
        "log_streams",
        "events",
        "errors",
        "warnings",
        "error_samples",
        "tail",
        "metrics",
        "utilization",
    ):
        assert key in data
    assert data["hosts"] == ["algo-2", "algo-3"] and data["instance_count"] == 2
    assert data["events"] == 2 * (1 + 5 + 2) and data["errors"] == 4
    assert [s["host"] for s in data["error_samples"]] == ["algo-2", "algo-3", "algo-2", "algo-3"]
    assert [len(t) for t in data["tail"].values()] == [3, 3]
    assert data["metrics"]["train:loss"] == {"last": 0.2, "best": 0.2, "goal": "min", "count": 10}
    assert data["instance_seconds"] == 1320.0
    assert data["utilization"]["cpu"] is None
    assert summary["unmapped_hosts"] == [] and summary["unmapped"] is None and summary["truncated"] == {}
    assert summary["errors"] == 6


def test_groups_without_logs_are_listed() -> None:
    summary = build_summary("job", DESCRIBE, [])
    assert summary["groups"]["dnn"]["hosts"] == [] and summary["groups"]["dnn"]["events"] == 0
    assert summary["groups"]["dnn"]["utilization"] is None  # metrics were not read


def test_natural_host_order() -> None:
    assert sorted(["algo-10", "algo-2", "algo-1"], key=natural_key) == ["algo-1", "algo-2", "algo-10"]


def test_size_bound_cuts_tails_first_then_samples() -> None:
    summary = build_summary("job", DESCRIBE, make_logs(lines_per_host=30, errors=10), tail_lines=20)
    full = json_size(summary)
    no_tails = json_size({**summary, "groups": {n: {**g, "tail": {}} for n, g in summary["groups"].items()}})
    # A bound that dropping (part of) the tails satisfies leaves error samples alone.
    bounded = enforce_size_limit(summary, no_tails + 300)
    assert json_size(bounded) <= no_tails + 300
    assert "tail" in bounded["truncated"] and "error_samples" not in bounded["truncated"]
    assert bounded["groups"]["data"]["error_samples"] == summary["groups"]["data"]["error_samples"]
    assert bounded["truncated"]["bytes_before"] == full
    # A tighter bound cuts samples too, and says so.
    tight = enforce_size_limit(summary, 4000)
    assert json_size(tight) <= 4000
    assert tight["truncated"]["tail"]["lines_per_host"] == 0
    assert tight["truncated"]["error_samples"]["dropped"] > 0
    assert tight["groups"]["data"]["errors"] == 20  # counters never shrink
    assert summary["truncated"] == {}  # the input is not modified


def test_size_bound_leaves_small_summaries_alone_and_rejects_tiny_bounds() -> None:
    summary = build_summary("job", DESCRIBE, make_logs())
    assert enforce_size_limit(summary, 10**6) is summary
    with pytest.raises(ValueError, match="at least"):
        enforce_size_limit(summary, MIN_MAX_XCOM_BYTES - 1)
    many = build_summary("job", DESCRIBE, make_logs())
    many["unmapped_hosts"] = [f"algo-{i}" for i in range(2000)]
    smallest = enforce_size_limit({**many, "problems": ["x" * 5000]}, MIN_MAX_XCOM_BYTES)
    assert json_size(smallest) <= MIN_MAX_XCOM_BYTES  # cut to the skeleton, never refused
    assert smallest["truncated"]["other"][-1] == "everything but the job's status and counts"
    trimmed = enforce_size_limit(many, 6000)
    assert len(trimmed["unmapped_hosts"]) == 10
    assert any("unmapped_hosts" in item for item in trimmed["truncated"]["other"])


def test_format_table_shows_groups_metrics_and_errors() -> None:
    summary = build_summary(
        "job",
        DESCRIBE,
        make_logs(errors=1),
        datapoints={"algo-1": {"GPUUtilization": [(START.timestamp() + 60, 40.0, 80.0)]}},
    )
    table = format_table(summary)
    lines = table.splitlines()
    assert lines[0] == "Training job job: Completed (Completed), billable 660 s"
    assert lines[1].split()[:3] == ["group", "instance", "type"]
    data_row = next(line for line in lines if line.startswith("data "))
    assert "ml.c5.18xlarge" in data_row and "algo-2,algo-3" in data_row
    assert _table_rows(table)["dnn"][-4:] == ["-", "-", "5.0/10", "-"]  # 40/80 summed over 8 GPUs, per GPU
    assert "dnn: train:loss last=0.2 best=0.2 (min, 5 values)" in table
    assert "[algo-1] ERROR algo-1 failure number 0" in table


def _table_rows(table: str) -> dict[str, list[str]]:
    """Each group's row of the utilisation table (the second of the two stacked tables)."""
    return {line.split()[0]: line.split() for line in table.splitlines() if line.startswith(("data ", "dnn "))}


def test_format_table_utilisation_cells_and_what_a_dash_means() -> None:
    at = START.timestamp() + 60
    cpu_and_memory = {
        host: {"CPUUtilization": [(at, 5.5, 7.25)], "MemoryUtilization": [(at, 0.044, 0.052)]}
        for host in ("algo-1", "algo-2", "algo-3")
    }
    table = format_table(build_summary("job", DESCRIBE, make_logs(), datapoints=cpu_and_memory))
    rows = _table_rows(table)
    # cpu, mem, gpu, gpu mem: small percentages keep their digits instead of reading as 0
    # per vCPU: 5.5/7.25 summed over 72 (ml.c5.18xlarge) and 96 (ml.p4d.24xlarge) vCPUs
    assert rows["data"][-4:] == ["0.08/0.1", "0.04/0.05", "-", "-"]
    assert rows["dnn"][-4:] == ["0.06/0.08", "0.04/0.05", "-", "-"]
    note = " ".join(table.split("\nutilisation:", 1)[1].split("\n  "))  # the note, wrapped
    assert "'-' = no CloudWatch datapoints for the group" in note
    assert "No GPU datapoints for any group" in note and "have no GPUs" in note

    # GPU data for one group only: the legend stays, the no-GPU explanation goes.
    with_gpu = {**cpu_and_memory, "algo-1": {**cpu_and_memory["algo-1"], "GPUUtilization": [(at, 40.0, 80.0)]}}
    table = format_table(build_summary("job", DESCRIBE, make_logs(), datapoints=with_gpu))
    assert _table_rows(table)["dnn"][-4:] == ["0.06/0.08", "0.04/0.05", "5.0/10", "-"]
    assert "utilisation: avg/max" in table and "No GPU datapoints" not in table

    # Everything present: only the unit; GPU figures of a type without known GPUs stay summed, marked *
    full = {
        host: {metric: [(at, 12.0, 12.0)] for metric in UTILIZATION_METRICS} for host in ("algo-1", "algo-2", "algo-3")
    }
    table = format_table(build_summary("job", DESCRIBE, make_logs(), datapoints=full))
    assert _table_rows(table)["data"][-4:] == ["0.17/0.17", "12/12", "12/12*", "12/12*"]
    assert _table_rows(table)["dnn"][-4:] == ["0.12/0.12", "12/12", "1.5/1.5", "1.5/1.5"]
    note = " ".join(table.split("\nutilisation:", 1)[1].split("\n  "))
    assert note.startswith(" avg/max over the training window, in % of all the group's vCPUs (cpu), GPUs (gpu)")
    assert "* = SageMaker's sum over devices (100 per device)" in note and "'-'" not in note

    # Metrics not read (include_metrics=False) is said as such, not left as a row of dashes.
    table = format_table(build_summary("job", DESCRIBE, make_logs(), datapoints=None))
    assert _table_rows(table)["data"][-4:] == ["-", "-", "-", "-"]
    assert "utilisation: not read (include_metrics=False)" in table


def test_one_unit_for_utilisation_in_the_xcom_the_table_the_series_and_the_verdict() -> None:
    """SageMaker's CPUUtilization sums vCPUs: 2160/4320 on an ml.c5.18xlarge (72 vCPUs) is 30/60 per vCPU,
    everywhere, converted once when the summary is built (the verdict divides nothing)."""
    from airflow_hetero.logs.per_group import SeriesSpec, VerdictSpec
    from airflow_hetero.logs.verdict import Thresholds, format_verdict

    at = START.timestamp() + 60
    datapoints = {h: {"CPUUtilization": [(at, 2160.0, 4320.0)]} for h in ("algo-2", "algo-3")}
    datapoints["algo-1"] = {"GPUUtilization": [(at, 320.0, 400.0)]}  # 8 GPUs of the p4d: 40/50 per GPU
    summary = build_summary(
        "job",
        DESCRIBE,
        make_logs(),
        datapoints=datapoints,
        series=SeriesSpec(4, (START.timestamp(), START.timestamp() + 240)),
        verdict=VerdictSpec(Thresholds()),
    )
    data, dnn = summary["groups"]["data"], summary["groups"]["dnn"]
    assert data["devices"] == {"cpus": 72, "gpus": 0} and dnn["devices"] == {"cpus": 96, "gpus": 8}
    assert (data["utilization"]["cpu"]["avg"], data["utilization"]["cpu"]["max"]) == (30.0, 60.0)
    assert data["utilization"]["cpu"]["unit"] == "% of all vCPUs"
    assert (dnn["utilization"]["gpu"]["avg"], dnn["utilization"]["gpu"]["unit"]) == (40.0, "% of all GPUs")
    assert [v for v in data["series"]["cpu"]["avg"] if v is not None] == [30.0]
    assert [v for v in dnn["series"]["gpu"]["avg"] if v is not None] == [40.0]
    judged = summary["verdict"]["groups"]
    assert (judged["data"]["busy_percent"], judged["data"]["peak_percent"]) == (30.0, 60.0)
    assert (judged["dnn"]["busy_percent"], judged["dnn"]["peak_percent"]) == (40.0, 50.0)
    assert _table_rows(format_table(summary))["data"][-4:-2] == ["30/60", "-"]
    assert "data: CPUs 30% busy (peak 60%)" in format_verdict(summary["verdict"])


def test_capacity_overrides_set_the_devices_the_summary_divides_by() -> None:
    at = START.timestamp() + 60
    datapoints = {h: {"CPUUtilization": [(at, 90.0, 95.0)]} for h in ("algo-1", "algo-2", "algo-3")}
    summary = build_summary(
        "job", DESCRIBE, make_logs(), datapoints=datapoints, capacity_overrides={"ml.c5.18xlarge": {"cpus": 1}}
    )
    data = summary["groups"]["data"]
    assert data["devices"] == {"cpus": 1, "gpus": None}
    assert (data["utilization"]["cpu"]["avg"], data["utilization"]["cpu"]["unit"]) == (90.0, "% of all vCPUs")
    assert summary["groups"]["dnn"]["utilization"]["cpu"]["avg"] == round(90 / 96, 2)


def test_the_same_cpu_seconds_are_twice_the_share_of_half_the_vcpus() -> None:
    """A host's CPUUtilization is a share of one core summed over cores (as the offline endpoint and SageMaker
    report it), whatever its type; the summary divides it by the type's vCPUs from the package's table. So the
    same work shows twice the share on ml.c5.xlarge (4 vCPUs) that it shows on ml.c5.2xlarge (8): what a
    right-sizing move to a smaller type assumes (moved from the right-sizing DAG test)."""
    at = START.timestamp() + 60
    datapoints = {h: {"CPUUtilization": [(at, 60.0, 80.0)]} for h in ("algo-1", "algo-2", "algo-3")}
    shares = {}
    for kind in ("ml.c5.2xlarge", "ml.c5.xlarge"):
        written: list[dict[str, Any]] = DESCRIBE["ResourceConfig"]["InstanceGroups"]  # type: ignore[index]
        groups = [{**g, "InstanceType": kind} if g["InstanceGroupName"] == "data" else g for g in written]
        describe = {**DESCRIBE, "ResourceConfig": {"InstanceGroups": groups}}
        data = build_summary("job", describe, make_logs(), datapoints=datapoints)["groups"]["data"]
        shares[kind] = data["utilization"]["cpu"]["avg"]
    assert shares == {"ml.c5.2xlarge": 7.5, "ml.c5.xlarge": 15.0}
