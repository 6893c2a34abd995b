"""The verdict end to end: synthetic instance metrics put to moto's CloudWatch, read back by summarize_training_job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from support.log_jobs import DescribeOverride
from support.verdict_jobs import data_and_train, flat, put_job

from airflow_hetero.logs import SeriesSpec, Thresholds, VerdictSpec
from airflow_hetero.logs.size_limit import json_size
from airflow_hetero.logs.summarize import summarize_training_job
from airflow_hetero.logs.table import format_table
from airflow_hetero.logs.verdict import format_verdict


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        yield {
            "sagemaker_client": boto3.client("sagemaker", region_name="us-east-1"),
            "logs_client": boto3.client("logs", region_name="us-east-1"),
            "cloudwatch_client": boto3.client("cloudwatch", region_name="us-east-1"),
        }


def job(aws: dict[str, Any], name: str, metrics: dict[str, dict[str, list[float]]], **kwargs: Any) -> dict[str, Any]:
    """The summary of :func:`put_job`'s job."""
    sagemaker = put_job(aws, name, metrics)
    summary = summarize_training_job(name, **{**aws, "sagemaker_client": sagemaker}, metric_definitions=[], **kwargs)
    json.dumps(summary)
    return summary


def test_data_group_holds_the_gpus_back(aws: dict[str, Any]) -> None:
    summary = job(aws, "data-bound", data_and_train(cpu=96, gpu=38))
    verdict = summary["verdict"]
    assert verdict["kind"] == "bottleneck" and verdict["bottleneck"] == "data_group"
    assert verdict["message"] == (
        "train_group GPUs 38% busy while data_group CPUs are at 96%: data_group is the bottleneck; "
        "try 4 data_group instances"
    )
    assert verdict["suggestion"] == {"group": "data_group", "instance_count": 4}
    train, data = verdict["groups"]["train_group"], verdict["groups"]["data_group"]
    assert (train["resource"], train["busy_percent"], train["state"]) == ("gpu", 38.0, "waiting")
    assert (data["resource"], data["busy_percent"], data["state"]) == ("cpu", 96.0, "saturated")
    # instance time: 2 x 600 + 1 x 600; the GPU group waited in every minute, the data group in none
    assert (data["instance_seconds"], train["instance_seconds"]) == (1200.0, 600.0)
    assert train["waiting_share"] == 1.0 and train["waiting_instance_seconds"] == 600.0
    assert data["waiting_share"] == 0.0
    assert verdict["waiting_share"] == pytest.approx(600 / 1800, abs=1e-3)
    # the series behind it: one point a minute, lined up on the same axis for both groups
    series = summary["groups"]["train_group"]["series"]
    assert series["step_seconds"] == 60 and 10 <= series["points"] <= 12
    assert [v for v in series["gpu"]["avg"] if v is not None] == [38] * 10  # 38 x 8 summed, per GPU
    assert summary["groups"]["data_group"]["series"]["start_epoch"] == series["start_epoch"]
    assert set(summary["groups"]["data_group"]["series"]) >= {"cpu", "memory"}
    assert "gpu" not in summary["groups"]["data_group"]["series"]


def test_gpu_bound_job_and_an_over_provisioned_data_group(aws: dict[str, Any]) -> None:
    verdict = job(aws, "gpu-bound", data_and_train(cpu=20, gpu=95))["verdict"]
    assert verdict["kind"] == "bottleneck" and verdict["bottleneck"] == "train_group"
    assert verdict["message"].startswith(
        "data_group CPUs 20% busy while train_group GPUs are at 95%: train_group is the bottleneck"
    )
    assert verdict["over_provisioned_groups"] == ["data_group"]
    assert verdict["groups"]["data_group"]["suggested_count"] == 1
    assert "data_group is over-provisioned: 20% busy; 1 instance would do" in verdict["message"]


def test_balanced_job(aws: dict[str, Any]) -> None:
    verdict = job(aws, "balanced", data_and_train(cpu=90, gpu=88))["verdict"]
    assert verdict["kind"] == "balanced" and verdict["bottleneck"] is None
    assert (
        verdict["message"]
        == "Every group is busy (data_group CPUs 90%, train_group GPUs 88%): no group waits on another"
    )
    assert verdict["waiting_share"] == 0.0


def test_nothing_saturated_and_idle_groups(aws: dict[str, Any]) -> None:
    verdict = job(aws, "idle", data_and_train(cpu=5, gpu=3))["verdict"]
    assert verdict["kind"] == "not_saturated"
    assert verdict["idle_groups"] == ["data_group", "train_group"]
    assert verdict["over_provisioned_groups"] == ["data_group"]
    assert "idle: train_group GPUs at 3.0%" in verdict["message"]
    assert verdict["waiting_share"] == 1.0


def test_thresholds_change_the_verdict(aws: dict[str, Any]) -> None:
    summary = job(
        aws, "strict", data_and_train(cpu=80, gpu=45), verdict=VerdictSpec(Thresholds.of({"busy_percent": 75}))
    )
    assert summary["verdict"]["bottleneck"] == "data_group"
    assert summary["verdict"]["thresholds"]["busy_percent"] == 75
    default = summarize_training_job(
        "strict",
        **{**aws, "sagemaker_client": DescribeOverride(aws["sagemaker_client"], **_times(summary))},
        metric_definitions=[],
    )
    assert default["verdict"]["kind"] == "not_saturated"  # 80 % is under the default 85 %


def _times(summary: dict[str, Any]) -> dict[str, Any]:
    from datetime import datetime

    w = summary["training_window"]
    return {
        "TrainingStartTime": datetime.fromisoformat(w["start"].replace("Z", "+00:00")),
        "TrainingEndTime": datetime.fromisoformat(w["end"].replace("Z", "+00:00")),
        "BillableTimeInSeconds": 600,
    }


def test_waiting_share_follows_the_minutes_and_disk_and_memory_are_kept(aws: dict[str, Any]) -> None:
    metrics = data_and_train(cpu=96, gpu=0)
    metrics["algo-2"]["GPUUtilization"] = [20, 20, 20, 20, 20, 90, 90, 90, 90, 90]  # starved first, then fed
    metrics["algo-2"]["DiskUtilization"] = flat(93)
    metrics["algo-2"]["MemoryUtilization"] = flat(30)
    summary = job(aws, "halves", metrics)
    train = summary["verdict"]["groups"]["train_group"]
    assert train["busy_percent"] == 55.0 and train["state"] == "busy"
    assert train["waiting_share"] == 0.5 and train["waiting_instance_seconds"] == 300.0
    assert train["disk_percent"] == 93.0
    assert "train_group disk at 93%: close to full" in summary["verdict"]["notes"]
    assert [v for v in summary["groups"]["train_group"]["series"]["disk"]["avg"] if v is not None] == flat(93)
    # the task log shows the table and the verdict
    text = format_verdict(summary["verdict"])
    assert "train_group: GPUs 55% busy (peak 90%), 600 instance-seconds, waiting 50% of the time [busy]" in text
    assert "data_group" in format_table(summary)


def test_no_metrics_no_verdict(aws: dict[str, Any]) -> None:
    summary = job(aws, "quiet", {})
    assert summary["verdict"]["kind"] == "no_data"
    assert all(group["series"] is None for group in summary["groups"].values())
    summary = job(aws, "unread", data_and_train(cpu=96, gpu=38), include_metrics=False)
    assert summary["verdict"]["kind"] == "no_data"
    assert "GetMetricData" not in summary["api_calls"]


def test_series_points_and_the_size_bound(aws: dict[str, Any]) -> None:
    summary = job(aws, "coarse", data_and_train(cpu=96, gpu=38), series=SeriesSpec(points=3))
    series = summary["groups"]["train_group"]["series"]
    assert series["points"] == 3 and series["step_seconds"] >= 200
    tight = job(aws, "tight", data_and_train(cpu=96, gpu=38), max_xcom_bytes=3000)
    assert json_size(tight) <= 3000
    assert tight["verdict"]["bottleneck"] == "data_group"  # the verdict survives the cut
    with pytest.raises(ValueError, match="SeriesSpec: points must be an integer of at least 1, got 0"):
        job(aws, "bad", {}, series=SeriesSpec(points=0))


def test_the_docs_show_what_the_task_log_prints(aws: dict[str, Any]) -> None:
    from pathlib import Path

    from support.verdict_jobs import data_bound_with_jitter

    from airflow_hetero.logs.report import verdict_lines

    page = (Path(__file__).resolve().parents[2] / "docs" / "instance-groups.md").read_text()
    shown = page.split("The task log shows the per-group table and then:\n\n```text\n", 1)[1].split("```", 1)[0]
    summary = job(aws, "docs-jitter", data_bound_with_jitter())
    assert "\n".join(verdict_lines(summary)) == shown.rstrip("\n")  # as format_report wraps it
