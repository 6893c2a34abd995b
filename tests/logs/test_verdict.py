"""The pure pieces of the verdict: device counts, downsampled series, the verdict's rules, the size bound."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from airflow_hetero.logs import verdict as verdict_module
from airflow_hetero.logs.series import MIN_SERIES_POINTS, group_series, halve, keys_of
from airflow_hetero.logs.size_limit import enforce_size_limit, json_size
from airflow_hetero.logs.verdict import Thresholds, format_verdict
from airflow_hetero.sagemaker_facts import Capacity, capacity, gpus, vcpus


def per_device(groups: dict[str, Any], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Groups with SageMaker's summed figures as the summary holds them: per device, with ``devices``
    (the conversion build_summary does, :mod:`airflow_hetero.logs.capacity`)."""
    from airflow_hetero.logs.capacity import capacity_of, per_device_series, per_device_utilization

    out = {}
    for name, g in groups.items():
        cap = capacity_of(g.get("instance_type"), overrides)
        out[name] = {
            **g,
            "devices": {"cpus": cap.cpus, "gpus": cap.gpus},
            "utilization": per_device_utilization(g.get("utilization"), cap),
            "series": per_device_series(g.get("series"), cap),
        }
    return out


def judge(summary: dict[str, Any], thresholds: Any = None, *, capacity_overrides: Any = None) -> Any:
    """The verdict of a summary built from SageMaker's figures (its groups converted as above)."""
    groups = per_device(summary.get("groups") or {}, capacity_overrides)
    return verdict_module.judge({**summary, "groups": groups}, thresholds)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("instance_type", "cpus", "gpu_count"),
    [
        ("ml.c5.18xlarge", 72, 0),
        ("ml.c5.xlarge", 4, 0),
        ("ml.m5.large", 2, 0),
        ("ml.p4d.24xlarge", 96, 8),
        ("ml.p3.2xlarge", 8, 1),
        ("ml.p3.16xlarge", 64, 8),
        ("ml.g5.xlarge", 4, 1),
        ("ml.g5.12xlarge", 48, 4),
        ("ml.g5.48xlarge", 192, 8),
        ("ml.p5.48xlarge", 192, 8),
        ("ml.t3.medium", 1, 0),
    ],
)
def test_device_counts(instance_type: str, cpus: int, gpu_count: int) -> None:
    assert capacity(instance_type) == Capacity(cpus, gpu_count)


def test_device_counts_unknown() -> None:
    assert capacity(None) == Capacity(None, None)
    assert capacity("bogus") == Capacity(None, None)
    assert vcpus("ml.g4dn.metal") is None and gpus("ml.g4dn.metal") == 8
    assert gpus("ml.p2.4xlarge") is None  # a size the table does not know: no guess


def points(start: float, values: list[float], step: float = 60.0) -> list[tuple[float, float | None, float | None]]:
    return [(start + i * step, v, v + 1) for i, v in enumerate(values)]


def test_series_averages_hosts_and_keeps_peaks() -> None:
    data = {
        "algo-1": {"CPUUtilization": points(1000.0, [10, 20, 30, 40])},
        "algo-2": {"CPUUtilization": points(1000.0, [30, 40, 50, 60]), "DiskUtilization": points(1000.0, [5, 5, 5, 6])},
        "algo-9": {"CPUUtilization": points(1000.0, [99, 99, 99, 99])},  # not in the group
    }
    series = group_series(["algo-1", "algo-2"], data, (1000.0, 1240.0), points=60)  # period 60
    assert series is not None
    assert series["step_seconds"] == 60 and series["points"] == 4  # never finer than the metric period
    assert series["start_epoch"] == 1000.0 and series["start"].endswith("Z")
    assert series["cpu"] == {"avg": [20, 30, 40, 50], "max": [31, 41, 51, 61]}
    assert series["disk"]["avg"] == [5, 5, 5, 6]
    assert keys_of(series) == ["cpu", "disk"]
    assert group_series(["algo-3"], data) is None


def test_series_downsamples_to_the_requested_points_with_gaps_as_null() -> None:
    values = [float(i % 10) for i in range(120)]
    data = {"h": {"GPUUtilization": points(0.0, values)}}
    series = group_series(["h"], data, (0.0, 120 * 60.0), points=12)
    assert series is not None and series["points"] == 12 and series["step_seconds"] == 600
    assert series["gpu"]["avg"] == [4.5] * 12 and series["gpu"]["max"] == [10] * 12
    sparse = {"h": {"CPUUtilization": [(0.0, 50.0, 50.0), (3000.0, 70.0, 80.0)]}}
    out = group_series(["h"], sparse, (0.0, 3600.0), points=6)
    assert out is not None and out["cpu"]["avg"] == [50, None, None, None, None, 70]
    with pytest.raises(ValueError, match="points must be at least 1"):
        group_series(["h"], data, points=0)


def test_halve_merges_neighbours() -> None:
    series = {
        "start": "x",
        "start_epoch": 0.0,
        "step_seconds": 60,
        "points": 5,
        "cpu": {"avg": [10, 20, None, 40, 7], "max": [11, 25, None, 44, 9]},
    }
    out = halve(series)
    assert out["points"] == 3 and out["step_seconds"] == 120
    assert out["cpu"] == {"avg": [15, 40, 7], "max": [25, 44, 9]}
    assert series["points"] == 5  # not changed in place


def group(instance_type: str, count: int, seconds: float | None = 600.0, **util: float | None) -> dict[str, Any]:
    return {
        "instance_type": instance_type,
        "instance_count": count,
        "instance_seconds": seconds * count if seconds is not None else None,
        "utilization": {
            key: ({"avg": util[key], "max": util[key] + 1} if util.get(key) is not None else None)
            for key in ("cpu", "memory", "gpu", "gpu_memory")
        },
        "series": None,
    }


def test_data_group_bottleneck_message_and_suggestion() -> None:
    summary = {
        "groups": {
            "data_group": group("ml.c5.18xlarge", 2, cpu=96 * 72, memory=40),
            "train_group": group("ml.p4d.24xlarge", 1, cpu=5 * 96, gpu=38 * 8, memory=20),
        }
    }
    verdict = judge(summary)
    assert verdict["kind"] == "bottleneck" and verdict["bottleneck"] == "data_group"
    assert verdict["message"] == (
        "train_group GPUs 38% busy while data_group CPUs are at 96%: data_group is the bottleneck; "
        "try 4 data_group instances"
    )
    assert verdict["suggestion"] == {"group": "data_group", "instance_count": 4}
    assert verdict["groups"]["train_group"]["resource"] == "gpu"
    assert verdict["groups"]["train_group"]["state"] == "waiting"
    assert verdict["groups"]["data_group"]["state"] == "saturated"
    assert verdict["instance_seconds"] == 1800.0
    json.dumps(verdict)  # JSON-able as it is


def test_suggestion_is_capped_by_max_scale_and_thresholds_are_parameters() -> None:
    summary = {
        "groups": {
            "d": group("ml.c5.xlarge", 2, cpu=4 * 99),
            "t": group("ml.g5.xlarge", 1, gpu=2),
        }
    }
    assert judge(summary)["suggestion"] == {"group": "d", "instance_count": 8}  # 2 x 4, not 2 x 37
    assert judge(summary, {"max_scale": 2})["suggestion"] == {"group": "d", "instance_count": 4}
    # with a busy threshold above 99 nobody is saturated any more
    relaxed = judge(summary, {"busy_percent": 99.5})
    assert relaxed["kind"] == "not_saturated" and relaxed["bottleneck"] is None
    assert relaxed["thresholds"]["busy_percent"] == 99.5


def test_gpu_bound_job_with_an_over_provisioned_data_group() -> None:
    summary = {
        "groups": {
            "data_group": group("ml.c5.18xlarge", 3, cpu=20 * 72),
            "train_group": group("ml.p4d.24xlarge", 1, gpu=95 * 8),
        }
    }
    verdict = judge(summary)
    assert verdict["bottleneck"] == "train_group"
    assert verdict["over_provisioned_groups"] == ["data_group"]
    assert verdict["groups"]["data_group"]["suggested_count"] == 1
    assert "data_group is over-provisioned: 20% busy; 1 instance would do" in verdict["message"]


def test_balanced_not_saturated_idle_and_no_data() -> None:
    busy = judge({"groups": {"a": group("ml.c5.xlarge", 1, cpu=360), "b": group("ml.g5.xlarge", 1, gpu=90)}})
    assert busy["kind"] == "balanced" and busy["bottleneck"] is None
    assert busy["message"] == "Every group is busy (a CPUs 90%, b GPUs 90%): no group waits on another"
    calm = judge({"groups": {"a": group("ml.c5.xlarge", 1, cpu=160), "b": group("ml.g5.xlarge", 1, gpu=4)}})
    assert calm["kind"] == "not_saturated"
    assert calm["message"].startswith("No group is saturated (busiest: a CPUs at 40%)")
    assert calm["idle_groups"] == ["b"] and "idle: b GPUs at 4.0%" in calm["message"]
    none = judge({"groups": {"a": group("ml.c5.xlarge", 1), "b": group("ml.g5.xlarge", 1)}})
    assert none["kind"] == "no_data" and none["groups"]["a"]["state"] == "no_data"
    assert none["message"] == "No utilisation datapoints: no verdict"
    assert judge({"groups": {}})["kind"] == "no_data"


def test_waiting_share_from_the_series_and_pressure_notes() -> None:
    train = group("ml.g5.xlarge", 2, seconds=1000.0, gpu=60, memory=95)
    train["series"] = {
        "points": 4,
        "gpu": {"avg": [10, 20, 90, None], "max": [10, 20, 90, None]},
        "disk": {"avg": [91, 93], "max": [91, 93]},
    }
    data = group("ml.c5.xlarge", 1, seconds=1000.0, cpu=300)
    data["series"] = {"points": 4, "cpu": {"avg": [390, 380, 100, 50], "max": [400, 400, 100, 50]}}
    verdict = judge({"groups": {"train": train, "data": data}})
    t, d = verdict["groups"]["train"], verdict["groups"]["data"]
    assert t["waiting_share"] == pytest.approx(2 / 3, abs=1e-3)  # 2 of the 3 buckets with data
    assert t["waiting_instance_seconds"] == pytest.approx(2000 * 0.667, abs=0.1)
    assert d["waiting_share"] == 0.5  # 100/4 and 50/4 are under 50 % of 4 vCPUs
    assert verdict["waiting_instance_seconds"] == pytest.approx(1334.0 + 500.0, abs=0.1)
    assert verdict["waiting_share"] == pytest.approx(1834.0 / 3000.0, abs=1e-3)
    assert "train memory at 95%: close to full" in verdict["notes"]
    assert "train disk at 92%: close to full" in verdict["notes"]
    text = format_verdict(verdict)
    assert "train: GPUs 60% busy (peak 61%), 2000 instance-seconds, waiting 67% of the time [busy]" in text
    assert "instance time spent waiting: 1834 of 3000 instance-seconds (61%)" in text


def test_capacity_overrides_and_unknown_types() -> None:
    summary = {"groups": {"a": group("ml.c5.xlarge", 1, cpu=98), "b": group("custom", 1, cpu=30)}}
    assert judge(summary)["groups"]["a"]["busy_percent"] == 24.5  # 98 of 400 (4 vCPUs)
    local = judge(summary, capacity_overrides={"ml.c5.xlarge": {"cpus": 1}})
    assert local["bottleneck"] == "a" and local["groups"]["a"]["busy_percent"] == 98.0
    assert "b: cpu figure not divided by devices: unknown instance type" in local["notes"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"busy": 3}, "unknown verdict threshold"),
        ({"busy_percent": 0}, r"must be in \(0, 100\]"),
        ({"busy_percent": 140}, r"must be in \(0, 100\]"),
        ({"waiting_percent": 90}, "idle_percent <= waiting_percent < busy_percent"),
        ({"max_scale": 0.5}, "max_scale must be at least 1"),
        ({"idle_percent": "5"}, "must be a number"),
        ({"idle_percent": float("nan")}, "must be a number"),
    ],
)
def test_bad_thresholds(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Thresholds.of(given)


def big_summary(groups: int, series_points: int, tail: int) -> dict[str, Any]:
    data = {
        f"algo-{i}": {
            m: points(0.0, [float(j % 97) + 0.3 for j in range(series_points)])
            for m in ("CPUUtilization", "MemoryUtilization", "GPUUtilization", "DiskUtilization")
        }
        for i in range(groups)
    }
    out: dict[str, Any] = {"training_job_name": "big", "groups": {}, "problems": [], "truncated": {}}
    for i in range(groups):
        out["groups"][f"g{i}"] = {
            "hosts": [f"algo-{i}"],
            "tail": {f"algo-{i}": [f"line {j} " + "x" * 80 for j in range(tail)]},
            "error_samples": [],
            "series": group_series([f"algo-{i}"], data, (0.0, series_points * 60.0), points=series_points),
        }
    return out


def test_size_bound_halves_series_to_a_third_before_cutting_tails() -> None:
    summary = big_summary(groups=5, series_points=64, tail=20)
    before = copy.deepcopy(summary)
    out = enforce_size_limit(summary, 20_000)
    assert json_size(out) <= 20_000
    assert summary == before  # the input is not changed
    assert out["truncated"]["series"]["points_per_group"] < 64
    sizes = sum(json_size(g["series"]) for g in out["groups"].values())
    assert sizes <= 20_000 // 3
    # series stay above the minimum and every group keeps one
    assert all(g["series"]["points"] >= MIN_SERIES_POINTS for g in out["groups"].values())


def test_size_bound_leaves_series_that_fit_and_drops_them_last() -> None:
    small = big_summary(groups=2, series_points=8, tail=2)
    assert enforce_size_limit(small, 48 * 1024) is small
    tight = big_summary(groups=5, series_points=64, tail=0)
    out = enforce_size_limit(tight, 2048)
    assert json_size(out) <= 2048
    assert out["truncated"]["series"] == {"dropped": True}
    assert all(g["series"] is None for g in out["groups"].values())


def test_a_running_job_is_judged_on_its_time_so_far() -> None:
    summary = {
        "partial": True,
        "groups": {"a": group("ml.c5.xlarge", 1, cpu=360), "b": group("ml.g5.xlarge", 1, gpu=20)},
    }
    verdict = judge(summary)
    assert verdict["bottleneck"] == "a"
    assert "the job is still running: the verdict covers its time so far" in verdict["notes"]
    assert not any("still running" in note for note in judge({**summary, "partial": False})["notes"])
