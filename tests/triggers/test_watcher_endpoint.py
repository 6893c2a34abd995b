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

import pytest
from botocore.exceptions import ClientError
from support.fault_proxy import FaultProxy, fault_proxy
from support.local_jobkit import BUCKET, put_source, request, unique
from support.trigger_runs import first_event, triggers_on

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.triggers.watcher import REFRESH_INTERVALS

pytestmark = pytest.mark.slow

CONN_ID = "watched_endpoint"
INTERVAL = 0.2
#: Long enough in Training for several refreshes (REFRESH_INTERVALS * INTERVAL = 2 s each).
SLEEPER = """
    import time
    time.sleep(8)
"""
trigger = triggers_on(CONN_ID, poll_interval=INTERVAL)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    with LocalEndpoint(workdir=tmp_path_factory.mktemp("endpoint"), stop_grace=2.0, log_flush_interval=0.2) as ep:
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


async def test_a_long_wait_is_listed_each_interval_and_described_on_changes_and_refreshes(
    endpoint: LocalEndpoint, proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="airflow_hetero.triggers.watcher")
    sm, s3 = endpoint.client("sagemaker"), endpoint.client("s3")
    job = unique("watched")
    sm.create_training_job(**request(job, put_source(s3, job, SLEEPER), groups=(("solo", "ml.c5.xlarge", 1),)))
    loop = asyncio.get_running_loop()
    started = loop.time()
    event = await first_event(trigger(job), timeout=120)
    waited = loop.time() - started
    assert (event["status"], event["job_status"]) == ("done", "Completed"), event

    transitions = sm.describe_training_job(TrainingJobName=job)["SecondaryStatusTransitions"]
    asked = list(proxy.log)
    described = [at for at, action in asked if action == "DescribeTrainingJob"]
    lists = sum(1 for _, action in asked if action == "ListTrainingJobs")
    every = REFRESH_INTERVALS * INTERVAL
    # every ListTrainingJobs was accepted: no fallback to describing every job every interval
    watcher_said = [r.getMessage() for r in caplog.records if r.name == "airflow_hetero.triggers.watcher"]
    assert not watcher_said  # no "ListTrainingJobs is not available", no list cut short
    assert lists >= waited / INTERVAL / 3, (lists, waited)  # one page an interval, on a loaded machine too
    assert len(described) * 3 < lists, (described, lists)  # far from one Describe an interval
    # each status change after the first Describe is described within a few intervals of it...
    for change in transitions:
        at = change["StartTime"].timestamp()
        if at > described[0]:
            assert any(at <= d <= at + 5 * INTERVAL + 1 for d in described), (change, described)
    # ...and while nothing changes (Training), the job is described every REFRESH_INTERVALS intervals:
    # the Describes that answered Training (the first for the change, the next ones refreshes; a
    # Describe stamped after Training began may still have answered Downloading on a loaded machine,
    # and the listing then tells the change at once)
    quiet = [
        at for at, action, body in proxy.answers if action == "DescribeTrainingJob" and answered(body) == "Training"
    ]
    gaps = [later - earlier for earlier, later in itertools.pairwise(quiet)]
    assert len(gaps) >= 2, (quiet, transitions)
    # (the proxy stamps a request when it arrives, the watcher its own clock around the call: on a
    # loaded CI machine a gap of 1.86 s was seen for 2.0 s; one Describe an interval gives INTERVAL)
    assert all(every / 2 <= gap <= 2 * every for gap in gaps), gaps
