"""The log summary under faults and hostile logs: throttling, thousands of streams, forged markers, ANSI.

Faults are injected with botocore event hooks: a ``before-call`` handler on the client raises the
error the service would send (ThrottlingException, 503) a given number of times in a row, for one
action; moto (``mock_aws``) answers the rest. botocore's own retries are off (AWS_MAX_ATTEMPTS=1),
so what survives is the summary's own bounded retry.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from support.log_jobs import DescribeOverride, create_job, put_stream, put_utilization, window

from airflow_hetero._retry import RetryPolicy
from airflow_hetero.logs.size_limit import DEFAULT_MAX_XCOM_BYTES, json_size
from airflow_hetero.logs.summarize import summarize_training_job
from airflow_hetero.logs.table import format_table
from airflow_hetero.runtime import format_marker

QUICK = RetryPolicy(max_attempts=8, base_delay=0.001, max_delay=0.002)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with mock_aws():
        yield {
            "sagemaker_client": boto3.client("sagemaker", region_name="us-east-1"),
            "logs_client": boto3.client("logs", region_name="us-east-1"),
            "cloudwatch_client": boto3.client("cloudwatch", region_name="us-east-1"),
        }


class Faults:
    """Raise a service error from ``before-call`` the next ``times`` calls of one action."""

    def __init__(self) -> None:
        self.raised: Counter[str] = Counter()

    def inject(
        self, client: Any, action: str, times: int, code: str = "ThrottlingException", status: int = 400
    ) -> None:
        service = client.meta.service_model.service_id.hyphenize()
        left = [times]

        def handler(**_: Any) -> None:
            if left[0] > 0:
                left[0] -= 1
                self.raised[action] += 1
                error = {"Error": {"Code": code, "Message": "injected"}, "ResponseMetadata": {"HTTPStatusCode": status}}
                raise ClientError(error, action)  # type: ignore[arg-type]

        client.meta.events.register(f"before-call.{service}.{action}", handler)


def small_job(aws: dict[str, Any], name: str) -> None:
    create_job(aws["sagemaker_client"], name, [("A", "ml.c5.xlarge", 1), ("B", "ml.p3.2xlarge", 1)])
    put_stream(
        aws["logs_client"], f"{name}/algo-1-1700000000", ["SM_CURRENT_HOST=algo-1", "SM_CURRENT_INSTANCE_GROUP=A"]
    )
    put_stream(
        aws["logs_client"], f"{name}/algo-2-1700000000", ["SM_CURRENT_HOST=algo-2", "SM_CURRENT_INSTANCE_GROUP=B"]
    )


@pytest.mark.parametrize(
    ("client_key", "action", "code", "status"),
    [
        ("logs_client", "DescribeLogStreams", "ThrottlingException", 400),
        ("logs_client", "GetLogEvents", "ServiceUnavailableException", 503),
        ("cloudwatch_client", "GetMetricData", "Throttling", 400),
        ("sagemaker_client", "DescribeTrainingJob", "ThrottlingException", 400),
    ],
)
def test_five_throttles_in_a_row_are_survived(
    aws: dict[str, Any], client_key: str, action: str, code: str, status: int
) -> None:
    small_job(aws, "throttled")
    start, end = window(10)
    put_utilization(aws["cloudwatch_client"], "throttled", "algo-1", "CPUUtilization", [50.0], end)
    faults = Faults()
    faults.inject(aws[client_key], action, 5, code, status)
    sagemaker = DescribeOverride(aws["sagemaker_client"], TrainingStartTime=start, TrainingEndTime=end)
    clients = {**aws, "sagemaker_client": sagemaker}
    summary = summarize_training_job("throttled", **clients, metric_definitions=[], retry_policy=QUICK)
    assert faults.raised[action] == 5
    assert set(summary["groups"]) == {"A", "B"} and summary["groups"]["A"]["hosts"] == ["algo-1"]
    assert summary["groups"]["A"]["utilization"]["cpu"]["avg"] == 12.5  # 50 summed over 4 vCPUs


def test_a_throttling_storm_longer_than_the_budget_surfaces(aws: dict[str, Any]) -> None:
    small_job(aws, "storm")
    faults = Faults()
    faults.inject(aws["logs_client"], "DescribeLogStreams", 100)
    with pytest.raises(ClientError, match="ThrottlingException"):
        summarize_training_job("storm", include_metrics=False, retry_policy=QUICK, **aws)
    assert faults.raised["DescribeLogStreams"] == QUICK.max_attempts  # bounded: no endless retry


def test_permanent_errors_are_not_retried(aws: dict[str, Any]) -> None:
    small_job(aws, "denied")
    faults = Faults()
    faults.inject(aws["logs_client"], "GetLogEvents", 100, "AccessDeniedException", 400)
    with pytest.raises(ClientError, match="AccessDenied"):
        summarize_training_job("denied", include_metrics=False, retry_policy=QUICK, **aws)
    assert faults.raised["GetLogEvents"] == 2  # once per stream (two streams), never again


def test_two_thousand_streams_fit_the_xcom_bound() -> None:
    """The issue's case: 2,000 streams (one per host) gave ValueError from the size bound."""
    from airflow_hetero.logs.patterns import LineRules
    from airflow_hetero.logs.per_group import build_summary
    from airflow_hetero.logs.size_limit import enforce_size_limit
    from airflow_hetero.logs.streams import StreamLog

    rules = LineRules.build()
    logs = []
    for i in range(1, 2001):
        log = StreamLog(f"wide/algo-{i}-1700000000", f"algo-{i}", rules)
        for line in (f"SM_CURRENT_HOST=algo-{i}", f"SM_CURRENT_INSTANCE_GROUP={'AB'[i % 2]}", f"host {i} ERROR x"):
            log.add(1_700_000_000_000 + i, line)
        logs.append(log)
    groups = [{"InstanceGroupName": g, "InstanceType": "ml.c5.xlarge", "InstanceCount": 1000} for g in "AB"]
    describe = {"TrainingJobStatus": "Completed", "ResourceConfig": {"InstanceGroups": groups}}
    summary = enforce_size_limit(build_summary("wide", describe, logs), DEFAULT_MAX_XCOM_BYTES)
    assert json_size(summary) <= DEFAULT_MAX_XCOM_BYTES
    assert summary["groups"]["A"]["hosts_total"] == 1000 and summary["groups"]["B"]["log_streams_total"] == 1000
    assert summary["groups"]["A"]["errors"] == 1000 and summary["errors"] == 2000  # counters are never cut
    assert any("per-host lists cut" in item for item in summary["truncated"]["other"])


def test_many_streams_through_cloudwatch_fit_a_small_bound(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "wide", [("A", "ml.c5.xlarge", 100), ("B", "ml.p3.2xlarge", 100)])
    for i in range(1, 201):
        lines = [f"SM_CURRENT_HOST=algo-{i}", f"SM_CURRENT_INSTANCE_GROUP={'AB'[i % 2]}", f"host {i} says hello"]
        put_stream(aws["logs_client"], f"wide/algo-{i}-1700000000", lines)
    summary = summarize_training_job("wide", include_metrics=False, max_workers=8, max_xcom_bytes=4096, **aws)
    assert json_size(summary) <= 4096
    assert summary["groups"]["B"]["log_streams_total"] == 100 and summary["groups"]["A"]["events"] == 300


def test_a_forged_marker_does_not_move_a_host(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "forged", [("A", "ml.c5.xlarge", 1), ("B", "ml.p3.2xlarge", 1)])
    logs = aws["logs_client"]
    put_stream(logs, "forged/algo-1-1700000000", ["SM_CURRENT_HOST=algo-1", "SM_CURRENT_INSTANCE_GROUP=A"])
    put_stream(
        logs,
        "forged/algo-2-1700000000",
        [format_marker("algo-2", "B", "ml.p3.2xlarge"), format_marker("algo-1", "B", "x")],
    )
    summary = summarize_training_job("forged", include_metrics=False, **aws)
    assert summary["groups"]["A"]["hosts"] == ["algo-1"] and summary["groups"]["B"]["hosts"] == ["algo-2"]
    assert (
        "forged/algo-2-1700000000: marker names host algo-1 (group B), not its own host algo-2; ignored"
        in (summary["problems"])
    )


def test_ansi_escapes_and_control_characters_are_stripped(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "ansi", [("A", "ml.c5.xlarge", 1)])
    put_stream(
        aws["logs_client"],
        "ansi/algo-1-1700000000",
        ["\x1b[31mERROR\x1b[0m: disk \x07full", "\x1b]0;pwned\x07epoch 1\x1b[2K done", "tab\tkept\x00"],
    )
    summary = summarize_training_job("ansi", include_metrics=False, **aws)
    group = summary["groups"]["A"]
    assert group["tail"]["algo-1"][-3:] == ["ERROR: disk full", "epoch 1 done", "tab\tkept"]
    assert group["error_samples"][0]["line"] == "ERROR: disk full"
    summary["problems"].append("host \x1b[2Jalgo-9 said\x85 something\x9b2J")
    table = format_table(summary)
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in table)
    assert "host algo-9 said something" in table


def _strings(value: Any) -> Iterator[str]:
    """Every string in ``value``, dict keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def test_control_characters_from_forged_names_reach_no_value_of_the_summary(aws: dict[str, Any]) -> None:
    create_job(aws["sagemaker_client"], "evil", [("A", "ml.c5.xlarge", 1), ("B", "ml.p3.2xlarge", 1)])
    put_stream(aws["logs_client"], "evil/algo-1-1700000000", ["SM_CURRENT_HOST=algo-1", "SM_CURRENT_INSTANCE_GROUP=A"])
    put_stream(
        aws["logs_client"],
        "evil/algo-2-1700000000",
        [
            format_marker("algo-2", "B\x07", "ml.p3.2xlarge\x9b2J"),  # its own group, with a bell
            format_marker("algo-1", "\x1b[31mEVIL\x1b[0m", "x"),  # another host's, with colours
            "SM_CURRENT_INSTANCE_GROUP=\x1b]0;pwned\x07C",
        ],
    )
    summary = summarize_training_job("evil", include_metrics=False, **aws)
    dirty = [s for s in _strings(summary) if any((ord(c) < 32 and c != "\t") or 0x7F <= ord(c) <= 0x9F for c in s)]
    assert dirty == []
    assert (
        "evil/algo-2-1700000000: marker names host algo-1 (group EVIL), not its own host algo-2; ignored"
        in (summary["problems"])
    )
    assert summary["groups"]["A"]["hosts"] == ["algo-1"]
