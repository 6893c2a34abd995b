"""The batched status check against the offline endpoint, which refuses what SageMaker refuses.

The endpoint validates every ListTrainingJobs by botocore's model (``SortBy`` is Name |
CreationTime | Status), so a request SageMaker would refuse fails here too. A counting proxy in
front of it tells what the triggerer's watcher sent while one job was waited on for many intervals.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.batch_jobs import gated_payload, release
from support.fault_proxy import FaultProxy, fault_proxy
from support.local_jobkit import BUCKET, unique
from support.trigger_runs import first_event, triggers_on

from airflow_hetero.local import LocalEndpoint, RunOptions
from airflow_hetero.triggers.watcher import REFRESH_INTERVALS, refresh_after

pytestmark = pytest.mark.slow

CONN_ID = "watched_endpoint"
INTERVAL = 0.2
#: The job trains until the watcher has described it in Training this many times plus one: this many
#: refresh gaps to measure.
REFRESHES = 3
trigger = triggers_on(CONN_ID, poll_interval=INTERVAL)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    with LocalEndpoint(
        workdir=tmp_path_factory.mktemp("endpoint"), run=RunOptions(stop_grace=2.0, log_flush_interval=0.2)
    ) as ep:
        ep.client("s3").create_bucket(Bucket=BUCKET)
        yield ep


@pytest.fixture
def proxy(endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A counting proxy in front of the endpoint; the connection ``CONN_ID`` goes through it."""
    with fault_proxy(endpoint.url) as counting:
        for name, value in endpoint.environ(CONN_ID).items():
            monkeypatch.setenv(name, value.replace(endpoint.url, counting.url))
        yield counting


def answered(body: bytes) -> str | None:
    """The SecondaryStatus a DescribeTrainingJob answered."""
    status = json.loads(body).get("SecondaryStatus")
    return status if isinstance(status, str) else None


def test_the_endpoint_refuses_a_sort_sagemaker_does_not_have(endpoint: LocalEndpoint) -> None:
    sm = endpoint.client("sagemaker")
    with pytest.raises(ClientError) as refused:
        sm.list_training_jobs(SortBy="LastModifiedTime", MaxResults=100)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert refused.value.response["Error"]["Message"] == (
        "1 validation error detected: Value 'LastModifiedTime' at 'sortBy' failed to satisfy constraint: "
        "Member must satisfy enum value set: [Name, CreationTime, Status]"
    )
    with pytest.raises(ClientError, match="at 'nameContains' failed to satisfy constraint"):
        sm.list_training_jobs(NameContains="no spaces")
    assert "TrainingJobSummaries" in sm.list_training_jobs(SortBy="CreationTime", SortOrder="Descending")


def quiet_describes(proxy: FaultProxy) -> list[float]:
    """When each DescribeTrainingJob that answered Training was answered (proxy stamps)."""
    answers = list(proxy.answers)
    return [at for at, action, body in answers if action == "DescribeTrainingJob" and answered(body) == "Training"]


async def until_refreshed(proxy: FaultProxy, waiting: asyncio.Future[Any], timeout: float = 180.0) -> None:
    """Wait, letting the watcher run (no blocking call), until ``REFRESHES + 1`` quiet describes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(quiet_describes(proxy)) < REFRESHES + 1:
        if waiting.done():
            raise AssertionError(f"the trigger ended while the job was training: {waiting.result()}")
        assert loop.time() < deadline, f"not refreshed {REFRESHES} times in {timeout} s: {proxy.forwarded}"
        await asyncio.sleep(0.05)


async def test_a_long_wait_is_listed_each_interval_and_described_on_changes_and_refreshes(
    endpoint: LocalEndpoint, proxy: FaultProxy, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.INFO, logger="airflow_hetero.triggers.watcher")
    sm, s3 = endpoint.client("sagemaker"), endpoint.client("s3")
    job = unique("watched")
    sm.create_training_job(**json.loads(gated_payload(s3, tmp_path, job)))
    # the job trains until the watcher has refreshed it REFRESHES times, however long the trigger
    # takes to start: on a loaded machine its first Describe came 10-20 s after the create (the hook
    # and client are made in a thread), after a job of a fixed length had nearly or fully ended
    waiting = asyncio.ensure_future(first_event(trigger(job), timeout=300))
    try:
        await until_refreshed(proxy, waiting)
    except BaseException:
        waiting.cancel()
        raise
    finally:
        release(tmp_path, job)
    event = await waiting
    assert (event["status"], event["job_status"]) == ("done", "Completed"), event

    transitions = sm.describe_training_job(TrainingJobName=job)["SecondaryStatusTransitions"]
    asked = list(proxy.log)
    described = [at for at, action in asked if action == "DescribeTrainingJob"]
    lists = [at for at, action in asked if action == "ListTrainingJobs"]
    every = refresh_after(INTERVAL)
    # every ListTrainingJobs was accepted: no fallback to describing every job every interval
    watcher_said = [r.getMessage() for r in caplog.records if r.name == "airflow_hetero.triggers.watcher"]
    assert not watcher_said  # no "ListTrainingJobs is not available", no list cut short
    # one page an interval from the watcher's first Describe (a listing needs one) to its last, with
    # a loaded machine's slack (0.2-0.25 s between listings on average seen at a load of 12-20)
    watched = described[-1] - described[0]
    assert len(lists) >= watched / INTERVAL / 3, (len(lists), watched)
    # each status change after the first Describe is described at the latest in the poll of the second
    # listing answered after it (the first may have been read before), before a fourth one is answered:
    # counted in listings, not seconds, the check holds however slow the machine
    for change in transitions:
        at = change["StartTime"].timestamp()
        if at > described[0]:
            assert any(d >= at and sum(1 for t in lists if at < t < d) <= 3 for d in described), (change, asked)
    # ...and while nothing changes (Training), the job is described again every REFRESH_INTERVALS
    # intervals, never sooner than refresh_after(INTERVAL) after the previous answer (a Describe stamped
    # after Training began may still have answered Downloading on a loaded machine, and the listing then
    # tells the change at once: only the Describes that answered Training count), and listed in between,
    # once a poll: at least the refresh's own poll, at most REFRESH_INTERVALS + 2 polls
    quiet = quiet_describes(proxy)
    gaps = [later - earlier for earlier, later in itertools.pairwise(quiet)]
    assert len(gaps) >= REFRESHES, (quiet, transitions)
    # (the proxy stamps an answer before the watcher receives it; 10 ms for the two clocks)
    assert all(gap >= every - 0.01 for gap in gaps), gaps
    between = [sum(1 for at in lists if earlier < at < later) for earlier, later in itertools.pairwise(quiet)]
    assert all(1 <= n <= REFRESH_INTERVALS + 2 for n in between), (between, gaps)
