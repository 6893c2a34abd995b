"""summarize_training_job against moto (mock_aws): log streams, events and metrics built by the tests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from support.log_jobs import (
    LOG_GROUP,
    DescribeOverride,
    create_job,
    ensure_group,
    now_ms,
    put_stream,
    put_utilization,
    resource_config_line,
    window,
)

from airflow_hetero.logs.cloudwatch import list_job_streams, read_job_logs, read_stream
from airflow_hetero.logs.patterns import LineRules
from airflow_hetero.logs.size_limit import json_size
from airflow_hetero.logs.streams import StreamLog
from airflow_hetero.logs.summarize import summarize_training_job
from airflow_hetero.runtime import format_marker

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sagemaker-training-startup-algo-2.log"
AB = [("A", "ml.c5.xlarge", 1), ("B", "ml.p3.2xlarge", 2)]
TYPES = {"A": "ml.c5.xlarge", "B": "ml.p3.2xlarge"}
LOSS = [{"Name": "train:loss", "Regex": r"loss=([0-9.]+)"}, {"Name": "val:acc", "Regex": r"acc=([0-9.]+)"}]


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        yield {
            "sagemaker_client": boto3.client("sagemaker", region_name="us-east-1"),
            "logs_client": boto3.client("logs", region_name="us-east-1"),
            "cloudwatch_client": boto3.client("cloudwatch", region_name="us-east-1"),
        }


def crossed_job(aws: dict[str, Any], name: str = "crossed") -> None:
    """Group A = [algo-2] (toolkit block), group B = [algo-3, algo-1]: algo-1 prints only the runtime
    marker, algo-3 is an MPI worker with no start-up block."""
    create_job(aws["sagemaker_client"], name, AB)
    layout = {"A": ["algo-2"], "B": ["algo-3", "algo-1"]}
    logs = aws["logs_client"]
    put_stream(
        logs,
        f"{name}/algo-2-1700000000",
        [
            "SM_CURRENT_HOST=algo-2",
            "SM_CURRENT_INSTANCE_GROUP=A",
            resource_config_line(layout, "algo-2", TYPES),
            "serving data",
            "WARNING: slow disk",
        ],
    )
    put_stream(
        logs,
        f"{name}/algo-1-1700000000",
        [
            format_marker("algo-1", "B", "ml.p3.2xlarge"),
            *(f"epoch {i} loss={1 / (i + 1):.2f} acc=0.{i}" for i in range(6)),
        ],
    )
    put_stream(logs, f"{name}/algo-3-1700000000", ["[1,1]<stdout>: worker loss=0.05", "ERROR: rank 1 lost"])


def test_crossed_host_numbers_marker_only_and_mpi_worker(aws: dict[str, Any]) -> None:
    crossed_job(aws)
    summary = summarize_training_job("crossed", metric_definitions=LOSS, **aws)
    json.dumps(summary)
    a, b = summary["groups"]["A"], summary["groups"]["B"]
    assert (a["hosts"], b["hosts"]) == (["algo-2"], ["algo-1", "algo-3"])
    assert a["mapped_by"] == {"algo-2": "toolkit"}
    assert b["mapped_by"] == {"algo-1": "marker", "algo-3": "group_map"}
    assert (a["instance_type"], a["instance_count"], b["instance_type"], b["instance_count"]) == (
        "ml.c5.xlarge",
        1,
        "ml.p3.2xlarge",
        2,
    )
    assert b["log_streams"] == ["crossed/algo-1-1700000000", "crossed/algo-3-1700000000"]
    assert (a["events"], b["events"]) == (5, 9)
    assert (a["errors"], a["warnings"], b["errors"], b["warnings"]) == (0, 1, 1, 0)
    assert b["error_samples"] == [
        {"host": "algo-3", "time": b["error_samples"][0]["time"], "line": "ERROR: rank 1 lost"}
    ]
    assert b["tail"]["algo-3"] == ["[1,1]<stdout>: worker loss=0.05", "ERROR: rank 1 lost"]
    assert b["metrics"]["train:loss"]["best"] == 0.05 and b["metrics"]["val:acc"]["best"] == 0.5
    assert "train:loss" not in a["metrics"]
    assert summary["unmapped_hosts"] == [] and summary["problems"] == [] and summary["truncated"] == {}
    assert summary["status"] == "Completed" and summary["partial"] is False
    calls = summary["api_calls"]
    assert calls["DescribeTrainingJob"] == 1
    assert calls["DescribeLogStreams"] == 2  # the listing plus the re-check for late streams
    assert calls["GetLogEvents"] == 6  # one page and one end-of-stream call per stream


def test_real_toolkit_startup_stream_maps_hosts_without_blocks(aws: dict[str, Any]) -> None:
    create_job(
        aws["sagemaker_client"],
        "fixture",
        [("data_group", "ml.c5.18xlarge", 2), ("dnn_group", "ml.p4d.24xlarge", 1)],
    )
    logs = aws["logs_client"]
    put_stream(logs, "fixture/algo-2-1700000000", [line for line in FIXTURE.read_text().splitlines() if line])
    put_stream(logs, "fixture/algo-3-1700000000", ["dispatcher ready"])
    put_stream(
        logs,
        "fixture/algo-1-1700000000",
        [
            "Traceback (most recent call last):",
            '  File "train.py", line 9, in <module>',
            "torch.cuda.OutOfMemoryError: CUDA out of memory.",
        ],
    )
    summary = summarize_training_job("fixture", include_metrics=False, **aws)
    data, dnn = summary["groups"]["data_group"], summary["groups"]["dnn_group"]
    assert data["hosts"] == ["algo-2", "algo-3"] and dnn["hosts"] == ["algo-1"]
    assert data["mapped_by"] == {"algo-2": "toolkit", "algo-3": "group_map"}
    assert (data["errors"], data["warnings"]) == (0, 0)
    assert dnn["errors"] == 1
    assert dnn["error_samples"][0]["exception"] == "torch.cuda.OutOfMemoryError: CUDA out of memory."
    assert data["utilization"] is None and "GetMetricData" not in summary["api_calls"]


def test_unmapped_hosts_and_too_many_hosts_for_a_group(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "unmapped", AB)
    layout = {"A": ["algo-1", "algo-2"], "B": ["algo-3"]}
    logs = aws["logs_client"]
    put_stream(logs, "unmapped/algo-1-1700000000", [resource_config_line(layout, "algo-1", TYPES)])
    put_stream(logs, "unmapped/algo-4-1700000000", ["who am I", "ERROR: lost"])
    summary = summarize_training_job("unmapped", include_metrics=False, **aws)
    assert summary["unmapped_hosts"] == ["algo-4"]
    assert summary["unmapped"]["events"] == 2 and summary["unmapped"]["errors"] == 1
    assert summary["unmapped"]["log_streams"] == ["unmapped/algo-4-1700000000"]
    assert summary["errors"] == 1
    assert "algo-4" not in summary["groups"]["A"]["hosts"] + summary["groups"]["B"]["hosts"]
    assert summary["groups"]["B"]["hosts"] == ["algo-3"] and summary["groups"]["B"]["log_streams"] == []
    assert summary["problems"] == ["group A: 2 hosts mapped (algo-1, algo-2) but InstanceCount is 1"]


def test_huge_lines_and_non_utf8_bytes(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "bytes", [("only", "ml.c5.xlarge", 1)])
    raw = b"ERROR bad bytes \xff\xfe end".decode("utf-8", "surrogateescape")  # lone surrogates
    replaced = b"ERROR replaced \xff".decode("utf-8", "replace")
    huge = "ERROR " + "z" * 200_000
    put_stream(aws["logs_client"], "bytes/algo-1-1700000000", [raw, replaced, huge, "ok \u00e9\u4e2d"])
    summary = summarize_training_job("bytes", include_metrics=False, tail_lines=5, **aws)
    json.dumps(summary, ensure_ascii=False).encode("utf-8")  # no lone surrogates left
    group = summary["groups"]["only"]
    assert group["mapped_by"] == {"algo-1": "single_group"}
    assert group["errors"] == 3 and group["events"] == 4
    assert group["bytes"] > 200_000
    samples = [s["line"] for s in group["error_samples"]]
    assert samples[0] == "ERROR bad bytes \ufffd\ufffd end"
    assert samples[1] == "ERROR replaced \ufffd"
    assert len(samples[2]) < 1100 and samples[2].endswith("chars]")
    assert group["tail"]["algo-1"][-1] == "ok \u00e9\u4e2d"
    assert json_size(summary) < 10_000


def test_empty_streams_and_a_job_without_logs(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "quiet", AB)
    create_job(aws["sagemaker_client"], "empty", AB)
    ensure_group(aws["logs_client"])
    aws["logs_client"].create_log_stream(logGroupName=LOG_GROUP, logStreamName="empty/algo-1-1700000000")
    put_stream(aws["logs_client"], "empty/algo-2-1700000000", [format_marker("algo-2", "A", "ml.c5.xlarge")])
    summary = summarize_training_job("empty", include_metrics=False, **aws)
    assert summary["unmapped_hosts"] == ["algo-1"]
    assert summary["unmapped"]["events"] == 0 and summary["unmapped"]["tail"] == {"algo-1": []}
    assert summary["api_calls"]["GetLogEvents"] == 4
    quiet = summarize_training_job("quiet", include_metrics=False, **aws)
    assert [g["hosts"] for g in quiet["groups"].values()] == [[], []]
    assert quiet["unmapped_hosts"] == [] and "GetLogEvents" not in quiet["api_calls"]


def test_no_log_group_yet(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "fresh", AB)
    summary = summarize_training_job("fresh", **aws)
    assert summary["api_calls"]["DescribeLogStreams"] == 1
    assert summary["groups"]["A"]["events"] == 0


class LateStreamLogs:
    """A logs client on which a new stream appears right after the first listing."""

    def __init__(self, client: Any, job: str) -> None:
        self.client, self.job, self.listings = client, job, 0

    def describe_log_streams(self, **kwargs: Any) -> Any:
        answer = self.client.describe_log_streams(**kwargs)
        self.listings += 1
        if self.listings == 1:
            put_stream(self.client, f"{self.job}/algo-3-1700000099", ["late host", "epoch 0 loss=0.7"])
        return answer

    def get_log_events(self, **kwargs: Any) -> Any:
        return self.client.get_log_events(**kwargs)


def test_stream_that_appears_after_the_first_read(aws: dict[str, Any]) -> None:
    crossed_job(aws, "late")
    aws["logs_client"].delete_log_stream(logGroupName=LOG_GROUP, logStreamName="late/algo-3-1700000000")
    late = LateStreamLogs(aws["logs_client"], "late")
    summary = summarize_training_job("late", metric_definitions=LOSS, **{**aws, "logs_client": late})
    assert late.listings == 3
    b = summary["groups"]["B"]
    assert b["hosts"] == ["algo-1", "algo-3"]
    assert "late/algo-3-1700000099" in b["log_streams"]
    assert b["tail"]["algo-3"] == ["late host", "epoch 0 loss=0.7"]


def test_job_metric_definitions_are_used_by_default(aws: dict[str, Any]) -> None:
    # moto replaces MetricDefinitions with its own "test:dcg" definition: read from the describe answer.
    create_job(aws["sagemaker_client"], "dcg", [("only", "ml.c5.xlarge", 1)])
    lines = [f"#quality_metric: host=algo-1, test dcg <score>={v}" for v in (0.3, 0.9, 0.5)]
    put_stream(aws["logs_client"], "dcg/algo-1-1700000000", lines)
    summary = summarize_training_job("dcg", include_metrics=False, **aws)
    assert summary["groups"]["only"]["metrics"] == {"test:dcg": {"last": 0.5, "best": 0.9, "goal": "max", "count": 3}}


def test_utilization_per_group_over_the_training_window(aws: dict[str, Any]) -> None:
    crossed_job(aws, "util")
    start, end = window(10)
    cw = aws["cloudwatch_client"]
    put_utilization(cw, "util", "algo-2", "CPUUtilization", [90.0, 95.0, 100.0], end)
    put_utilization(cw, "util", "algo-1", "GPUUtilization", [10.0, 20.0], end)
    put_utilization(cw, "util", "algo-3", "GPUUtilization", [30.0, 40.0], end)
    put_utilization(cw, "util", "algo-1", "GPUUtilization", [99.0], start - timedelta(hours=1))
    sagemaker = DescribeOverride(
        aws["sagemaker_client"], TrainingStartTime=start, TrainingEndTime=end, BillableTimeInSeconds=600
    )
    summary = summarize_training_job("util", **{**aws, "sagemaker_client": sagemaker}, metric_definitions=[])
    a, b = summary["groups"]["A"]["utilization"], summary["groups"]["B"]["utilization"]
    # per device: SageMaker's 95/100 summed over an ml.c5.xlarge's 4 vCPUs; ml.p3.2xlarge has 1 GPU
    assert a["cpu"] == {"avg": 23.75, "max": 25.0, "hosts": 1, "datapoints": 3, "unit": "% of all vCPUs"}
    assert a["gpu"] is None
    assert b["gpu"] == {"avg": 25.0, "max": 40.0, "hosts": 2, "datapoints": 4, "unit": "% of all GPUs"}
    assert summary["groups"]["A"]["devices"] == {"cpus": 4, "gpus": 0}
    assert summary["groups"]["B"]["instance_seconds"] == 1200.0
    assert summary["api_calls"]["GetMetricData"] == 1


def test_running_job_gives_partial_summary(aws: dict[str, Any]) -> None:
    crossed_job(aws, "running")
    start, _ = window(5)
    sagemaker = DescribeOverride(
        aws["sagemaker_client"],
        TrainingJobStatus="InProgress",
        SecondaryStatus="Training",
        TrainingStartTime=start,
        TrainingEndTime=None,
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": start, "StatusMessage": "go"}],
    )
    summary = summarize_training_job("running", **{**aws, "sagemaker_client": sagemaker})
    assert summary["partial"] is True and summary["status"] == "InProgress"
    assert summary["timeline"][0]["ongoing"] is True and summary["timeline"][0]["seconds"] >= 299
    assert summary["groups"]["B"]["events"] == 9


def test_size_bound_through_the_whole_path(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "big", AB)
    layout = {"A": ["algo-2"], "B": ["algo-1", "algo-3"]}
    for host in ("algo-1", "algo-2", "algo-3"):
        lines = [resource_config_line(layout, host, TYPES)]
        lines += [f"ERROR {host} {i} " + "x" * 400 for i in range(30)]
        lines += [f"{host} line {i} " + "y" * 400 for i in range(50)]
        put_stream(aws["logs_client"], f"big/{host}-1700000000", lines)
    summary = summarize_training_job("big", include_metrics=False, max_xcom_bytes=6000, **aws)
    assert json_size(summary) <= 6000
    cut = summary["truncated"]
    assert cut["max_xcom_bytes"] == 6000 and cut["bytes_before"] > 30_000 and cut["bytes_after"] <= 6000
    assert cut["tail"]["lines_per_host"] == 0 and "error_samples" in cut
    assert summary["groups"]["B"]["errors"] == 60  # counters stay exact
    roomy = summarize_training_job("big", include_metrics=False, max_xcom_bytes=40_000, **aws)
    assert json_size(roomy) <= 40_000 and "error_samples" not in roomy["truncated"]
    assert roomy["groups"]["B"]["error_samples"][0]["line"].startswith("ERROR algo-1 0 ")


def test_pagination_of_streams_and_events(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "many", [("only", "ml.c5.xlarge", 70)])
    logs = aws["logs_client"]
    for i in range(1, 61):
        put_stream(logs, f"many/algo-{i}-1700000000", [f"host {i}"])
    put_stream(logs, "many/algo-70-1700000000", (f"line {i}" for i in range(25_000)))
    put_stream(logs, "other-job/algo-1-1700000000", ["not ours"])
    summary = summarize_training_job("many", include_metrics=False, tail_lines=2, **aws)
    group = summary["groups"]["only"]
    assert len(group["hosts"]) == 61 and group["events"] == 60 + 25_000
    assert group["tail"]["algo-70"] == ["line 24998", "line 24999"]
    assert summary["api_calls"]["DescribeLogStreams"] == 4  # 61 streams = 2 pages, listed twice
    assert summary["api_calls"]["GetLogEvents"] == 60 * 2 + 3 + 1


def test_failure_paths(aws: dict[str, Any]) -> None:
    with pytest.raises(ClientError):
        summarize_training_job("does-not-exist", **aws)
    crossed_job(aws, "bad")
    untouched = LateStreamLogs(aws["logs_client"], "bad")
    with pytest.raises(ValueError, match="invalid pattern"):
        summarize_training_job("bad", error_patterns=["(oops"], **{**aws, "logs_client": untouched})
    assert untouched.listings == 0  # rejected before any log was read
    with pytest.raises(ValueError, match="cloudwatch_client"):
        summarize_training_job("bad", **{**aws, "cloudwatch_client": None})
    with pytest.raises(ValueError, match="tail_lines"):
        summarize_training_job("bad", tail_lines=-1, **aws)
    with pytest.raises(ValueError, match="max_xcom_bytes"):
        summarize_training_job("bad", max_xcom_bytes=10, **aws)


# -- the reader on scripted clients ---------------------------------------------------------------


class ScriptedLogs:
    """Answers GetLogEvents from a script of (events, token) pages; records tokens and concurrency."""

    def __init__(self, pages: dict[str, list[tuple[list[str], str]]], delay: float = 0.0) -> None:
        self.pages, self.delay = pages, delay
        self.sent: dict[str, list[str | None]] = {name: [] for name in pages}
        self.active = self.peak = 0
        self.lock = threading.Lock()

    def describe_log_streams(self, **kwargs: Any) -> dict[str, Any]:
        return {"logStreams": [{"logStreamName": n} for n in sorted(self.pages)]}

    def get_log_events(self, **kwargs: Any) -> dict[str, Any]:
        name, token = kwargs["logStreamName"], kwargs.get("nextToken")
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.delay)
        self.sent[name].append(token)
        script = self.pages[name]
        index = 0 if token is None else int(token.split("-")[1])
        with self.lock:
            self.active -= 1
        if index >= len(script):
            return {"events": [], "nextForwardToken": token}
        messages, _ = script[index]
        return {
            "events": [{"timestamp": now_ms(), "message": m} for m in messages],
            "nextForwardToken": f"t-{index + 1}",
        }


def test_empty_pages_with_new_tokens_do_not_end_the_read() -> None:
    client = ScriptedLogs({"j/algo-1-1": [([], ""), ([], ""), (["a", "b"], ""), ([], ""), (["c"], "")]})
    seen: list[str] = []
    last = read_stream(client, "j/algo-1-1", lambda events: seen.extend(e["message"] for e in events))
    assert seen == ["a", "b", "c"]
    assert client.sent["j/algo-1-1"] == [None, "t-1", "t-2", "t-3", "t-4", "t-5"]
    assert last == "t-5"


def test_reads_are_concurrent_but_bounded() -> None:
    pages = {f"j/algo-{i}-1": [([f"m{i}"], "")] for i in range(8)}
    client = ScriptedLogs(pages, delay=0.02)
    rules = LineRules.build()
    logs, problems = read_job_logs(client, "j", lambda s: StreamLog(s, s, rules), max_workers=3)
    assert [log.events for log in logs] == [1] * 8 and problems == []
    assert 2 <= client.peak <= 3
    with pytest.raises(ValueError, match="max_workers"):
        read_job_logs(client, "j", lambda s: StreamLog(s, s, rules), max_workers=0)


def test_stream_deleted_while_reading_is_a_problem_not_a_crash(aws: dict[str, Any]) -> None:
    put_stream(aws["logs_client"], "gone/algo-1-1700000000", ["x"])

    class Vanishing:
        def describe_log_streams(self, **kwargs: Any) -> Any:
            return aws["logs_client"].describe_log_streams(**kwargs)

        def get_log_events(self, **kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "gone"}}, "GetLogEvents")

    rules = LineRules.build()
    logs, problems = read_job_logs(Vanishing(), "gone", lambda s: StreamLog(s, "algo-1", rules))
    assert [log.events for log in logs] == [0]
    assert problems == ["log stream gone/algo-1-1700000000 disappeared while being read"]
    assert list_job_streams(aws["logs_client"], "gone") == ["gone/algo-1-1700000000"]

    class Broken(Vanishing):
        def get_log_events(self, **kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "GetLogEvents")

    with pytest.raises(ClientError, match="AccessDenied"):
        read_job_logs(Broken(), "gone", lambda s: StreamLog(s, "algo-1", rules))


class EndlessLogs:
    """A stream that a busy running job keeps writing: every page is full and has a new token."""

    def __init__(self) -> None:
        self.calls = 0

    def describe_log_streams(self, **kwargs: Any) -> dict[str, Any]:
        return {"logStreams": [{"logStreamName": "busy/algo-1-1700000000"}]}

    def get_log_events(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        stamp = now_ms() - 2_000 + self.calls * 1_000  # the writer moves on while we read
        return {"events": [{"timestamp": stamp, "message": f"step {self.calls}"}], "nextForwardToken": f"t{self.calls}"}


def test_running_job_reading_stops_at_the_moment_reading_started(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "busy", [("only", "ml.c5.xlarge", 1)])
    sagemaker = DescribeOverride(aws["sagemaker_client"], TrainingJobStatus="InProgress")
    endless = EndlessLogs()
    summary = summarize_training_job(
        "busy", include_metrics=False, **{**aws, "sagemaker_client": sagemaker, "logs_client": endless}
    )
    assert summary["partial"] is True
    assert 2 <= endless.calls <= 4  # pages up to "now", then stop
    assert summary["groups"]["only"]["events"] == endless.calls
