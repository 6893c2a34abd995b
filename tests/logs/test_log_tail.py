"""LogTailer: incremental per-stream reading, group prefixes, few stream listings, paging."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from support.moto_jobs import FAST, put_logs, toolkit_startup

from airflow_hetero.job.resource_config import total_instances as expected_hosts
from airflow_hetero.logs.tail import LogsGroupResolver, LogTailer

GROUPS_DICT = json.dumps(
    {
        "data_group": {
            "instance_group_name": "data_group",
            "instance_type": "ml.c5.xlarge",
            "hosts": ["algo-2", "algo-3"],
        },
        "dnn_group": {"instance_group_name": "dnn_group", "instance_type": "ml.p3.2xlarge", "hosts": ["algo-1"]},
    }
)


@pytest.fixture
def logs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("logs", region_name="us-east-1")


def tailer(client: Any, job: str, hosts: int = 0) -> tuple[LogTailer, list[str]]:
    lines: list[str] = []
    t = LogTailer(client, job, emit=lines.append, resolver=LogsGroupResolver(), expected_hosts=hosts, retry_policy=FAST)
    return t, lines


def test_new_lines_only_once_with_group_prefix(logs: Any) -> None:
    put_logs(logs, "job-a", "algo-1", [*toolkit_startup("algo-1", "dnn_group"), "step 1"], start_ms=None)
    t, lines = tailer(logs, "job-a", hosts=1)
    assert t.poll() == 4
    assert lines[-1] == "[dnn_group/algo-1] step 1"
    assert lines[0].startswith("[dnn_group/algo-1] ")  # the line before the group was named, too
    assert t.poll() == 0
    put_logs(logs, "job-a", "algo-1", ["step 2", "step 3"])
    assert t.poll() == 2
    assert lines[-2:] == ["[dnn_group/algo-1] step 2", "[dnn_group/algo-1] step 3"]


def test_streams_are_listed_only_while_hosts_may_be_missing(logs: Any) -> None:
    put_logs(logs, "job-b", "algo-1", ["a"])
    t, lines = tailer(logs, "job-b", hosts=2)
    t.poll()
    t.poll()
    assert t.list_calls == 2  # one host of two seen: keep looking for the other
    put_logs(logs, "job-b", "algo-2", ["b"])
    t.poll()
    assert t.list_calls == 3 and t.hosts_seen == {"algo-1", "algo-2"}
    for _ in range(3):
        t.poll()
    assert t.list_calls == 3  # all hosts known: no more listing
    t.poll(rescan=True)
    assert t.list_calls == 4
    assert sorted(lines) == ["[algo-1] a", "[algo-2] b"]


def test_mpi_worker_without_startup_block_gets_its_group_from_another_host(logs: Any) -> None:
    put_logs(
        logs, "job-c", "algo-2", [*toolkit_startup("algo-2", "data_group"), f"SM_INSTANCE_GROUPS_DICT={GROUPS_DICT}"]
    )
    put_logs(logs, "job-c", "algo-3", ["worker says hi"])
    t, lines = tailer(logs, "job-c", hosts=3)
    t.poll()
    assert "[data_group/algo-3] worker says hi" in lines


def test_unknown_group_falls_back_to_host(logs: Any) -> None:
    put_logs(logs, "job-d", "algo-4", ["no toolkit here"])
    t, lines = tailer(logs, "job-d")
    t.poll()
    assert lines == ["[algo-4] no toolkit here"]


def test_streams_of_other_jobs_with_the_same_prefix_are_ignored(logs: Any) -> None:
    put_logs(logs, "job-e", "algo-1", ["mine"])
    put_logs(logs, "job-e-2", "algo-1", ["not mine"])
    t, lines = tailer(logs, "job-e")
    t.poll()
    assert lines == ["[algo-1] mine"]


def test_missing_log_group_means_no_streams_yet() -> None:
    with mock_aws():
        t, lines = tailer(boto3.client("logs", region_name="us-east-1"), "job-f", hosts=2)
        assert t.poll() == 0 and lines == []


def test_emit_tail_prints_last_lines_of_each_stream(logs: Any) -> None:
    put_logs(logs, "job-g", "algo-1", [*toolkit_startup("algo-1", "dnn_group"), *[f"line {i}" for i in range(100)]])
    t, lines = tailer(logs, "job-g")
    assert t.emit_tail(lines=3) == 3
    assert lines == ["[dnn_group/algo-1] line 97", "[dnn_group/algo-1] line 98", "[dnn_group/algo-1] line 99"]


def test_expected_hosts() -> None:
    hetero = {"ResourceConfig": {"InstanceGroups": [{"InstanceCount": 2}, {"InstanceCount": 1}]}}
    assert expected_hosts(hetero) == 3
    assert expected_hosts({"ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 4}}) == 4
    assert expected_hosts({}) == 0


class PagedLogs:
    """A Logs client with CloudWatch's token rules: empty pages with new tokens, same token at the end."""

    def __init__(self, pages: list[list[str]], fail_first: int = 0) -> None:
        self.pages = pages
        self.fail_first = fail_first
        self.get_calls = 0

    def describe_log_streams(self, **kwargs: Any) -> dict[str, Any]:
        return {"logStreams": [{"logStreamName": "job-p/algo-1-1700000000"}]}

    def get_log_events(self, **kwargs: Any) -> dict[str, Any]:
        self.get_calls += 1
        if self.fail_first:
            self.fail_first -= 1
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "GetLogEvents")
        index = int(kwargs.get("nextToken", "f/0").split("/")[1])
        if index >= len(self.pages):
            return {"events": [], "nextForwardToken": kwargs["nextToken"]}
        events = [{"timestamp": index, "message": m} for m in self.pages[index]]
        return {"events": events, "nextForwardToken": f"f/{index + 1}"}


def test_a_live_poll_reads_one_page_per_stream_and_the_flush_reads_to_the_end() -> None:
    client = PagedLogs([["a", "b"], [], ["c"]], fail_first=2)
    lines: list[str] = []
    t = LogTailer(client, "job-p", emit=lines.append, resolver=LogsGroupResolver(), expected_hosts=1, retry_policy=FAST)
    assert t.poll() == 2 and t.get_calls == 1  # the two throttled attempts are retries of that one call
    assert t.poll() == 0 and t.get_calls == 2  # an empty page with a new token
    assert t.poll() == 1 and t.get_calls == 3
    assert lines == ["[algo-1] a", "[algo-1] b", "[algo-1] c"]
    client.pages.append(["d"])
    client.pages.append(["e"])
    assert t.flush() == 2 and lines[-2:] == ["[algo-1] d", "[algo-1] e"]
    assert t.get_calls == 6  # d, e, then the page that returns the same token: the end
    calls = client.get_calls
    client.pages.append(["f"])
    assert t.poll() == 1 and lines[-1] == "[algo-1] f"
    assert client.get_calls == calls + 1  # resumes from the remembered token, not from the head


def test_a_full_page_is_followed_within_the_same_poll() -> None:
    client = PagedLogs([[f"l{i}" for i in range(10_000)], ["after"], []])
    lines: list[str] = []
    t = LogTailer(client, "job-p", emit=lines.append, resolver=LogsGroupResolver(), expected_hosts=1, retry_policy=FAST)
    assert t.poll() == 10_001
    assert t.get_calls == 2 and lines[-1] == "[algo-1] after"


class RecordingLogs(PagedLogs):
    """Records the order of reads and emits, to show lines leave before the next page is read."""

    def __init__(self, pages: list[list[str]], journal: list[str]) -> None:
        super().__init__(pages)
        self.journal = journal

    def get_log_events(self, **kwargs: Any) -> dict[str, Any]:
        self.journal.append("read")
        return super().get_log_events(**kwargs)


def test_each_page_is_emitted_before_the_next_is_read() -> None:
    journal: list[str] = []
    client = RecordingLogs([["a"], ["b"]], journal)
    t = LogTailer(client, "job-p", emit=journal.append, resolver=LogsGroupResolver(), expected_hosts=1)
    t.flush()
    assert journal == ["read", "[algo-1] a", "read", "[algo-1] b", "read"]


def test_one_get_log_events_per_stream_per_poll(logs: Any) -> None:
    for host in ("algo-1", "algo-2", "algo-3"):
        put_logs(logs, "job-c", host, [f"{host} {i}" for i in range(5)])
    t, lines = tailer(logs, "job-c", hosts=3)
    for round_no in range(4):
        before = t.get_calls
        for host in ("algo-1", "algo-2", "algo-3"):
            put_logs(logs, "job-c", host, [f"{host} more {round_no}"])
        t.poll()
        assert t.get_calls - before == 3
    assert len(lines) == 3 * 5 + 3 * 4
    for host in ("algo-1", "algo-2", "algo-3"):  # in order within each stream
        mine = [line.split("] ", 1)[1] for line in lines if line.startswith(f"[{host}]")]
        assert mine == [f"{host} {i}" for i in range(5)] + [f"{host} more {r}" for r in range(4)]
