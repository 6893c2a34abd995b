"""JobWatcher: one client and batched status checks for every deferred job of a triggerer."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError, ParamValidationError
from support.service_model import check_answer, check_request

from airflow_hetero._retry import RetryPolicy
from airflow_hetero.triggers import HeteroTrainingTrigger
from airflow_hetero.triggers.training import FIRST_CHECK_WAIT
from airflow_hetero.triggers.watcher import REFRESH_INTERVALS, JobWatcher, _by_loop, refresh_after

FAST = RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.001)


def client_error(code: str, status: int = 400, message: str | None = None) -> ClientError:
    error = {"Code": code, "Message": message or code}
    return ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}, "X")


class FakeSageMaker:
    """Training jobs whose status the test moves; counts calls; ListTrainingJobs filters like the service."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.calls: Counter[str] = Counter()
        self.described: Counter[str] = Counter()  # DescribeTrainingJob calls per job
        self.clients_opened = 0
        self.list_error: Exception | None = None
        self.clock = datetime.now(UTC)
        self.describe_delays: list[float] = []  # seconds each next DescribeTrainingJob takes (then none)
        self.described_at: list[float] = []  # loop time of each DescribeTrainingJob answer
        self.listed_at: list[float] = []  # loop time of each ListTrainingJobs call

    def tick(self) -> datetime:
        self.clock += timedelta(seconds=1)
        return self.clock

    def add(self, name: str) -> None:
        now = self.tick()
        self.jobs[name] = {  # every member the service always sends (checked against its output shape)
            "TrainingJobName": name,
            "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
            "ModelArtifacts": {"S3ModelArtifacts": ""},
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Starting",
            "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
            "ResourceConfig": {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
            "CreationTime": now,
            "LastModifiedTime": now,
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        }

    def move(self, name: str, status: str, secondary: str) -> None:
        self.jobs[name].update(TrainingJobStatus=status, SecondaryStatus=secondary, LastModifiedTime=self.tick())

    async def describe_training_job(self, **kwargs: Any) -> dict[str, Any]:
        self.calls["DescribeTrainingJob"] += 1
        check_request("DescribeTrainingJob", kwargs)
        self.described[kwargs["TrainingJobName"]] += 1
        await asyncio.sleep(self.describe_delays.pop(0) if self.describe_delays else 0)
        self.described_at.append(asyncio.get_running_loop().time())
        if kwargs["TrainingJobName"] not in self.jobs:
            raise client_error("ValidationException", message="Requested resource not found.")  # the service's words
        answer = dict(self.jobs[kwargs["TrainingJobName"]])
        check_answer("DescribeTrainingJob", answer)
        return answer

    async def list_training_jobs(self, **kwargs: Any) -> dict[str, Any]:
        self.calls["ListTrainingJobs"] += 1
        self.listed_at.append(asyncio.get_running_loop().time())
        check_request("ListTrainingJobs", kwargs)  # SortBy="LastModifiedTime" is refused, as SageMaker does
        await asyncio.sleep(0)
        if self.list_error is not None:
            raise self.list_error
        after = kwargs.get("LastModifiedTimeAfter", datetime.min.replace(tzinfo=UTC))
        by = {"Name": "TrainingJobName", "CreationTime": "CreationTime", "Status": "TrainingJobStatus"}
        items = sorted(
            (j for j in self.jobs.values() if j["LastModifiedTime"] > after),
            key=lambda j: j[by[kwargs.get("SortBy", "CreationTime")]],
            reverse=kwargs.get("SortOrder", "Descending") == "Descending",
        )
        start = int(kwargs.get("NextToken") or 0)
        page = items[start : start + kwargs.get("MaxResults", 10)]
        answer: dict[str, Any] = {
            "TrainingJobSummaries": [
                {k: j[k] for k in ("TrainingJobName", "TrainingJobArn", "CreationTime", "LastModifiedTime")}
                | {"TrainingJobStatus": j["TrainingJobStatus"], "SecondaryStatus": j["SecondaryStatus"]}
                for j in page
            ]
        }
        if start + len(page) < len(items):
            answer["NextToken"] = str(start + len(page))
        check_answer("ListTrainingJobs", answer)
        return answer


class FakeHook:
    def __init__(self, service: FakeSageMaker) -> None:
        self.service = service

    async def async_client(self) -> Any:
        service = self.service

        @contextlib.asynccontextmanager
        async def conn() -> AsyncIterator[FakeSageMaker]:
            service.clients_opened += 1
            yield service

        return conn()


@pytest.fixture(params=[0.0, 0.4], ids=["prompt-start", "slow-start"])
def service(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> FakeSageMaker:
    """The fake behind every trigger's hook. ``slow-start``: the watcher's hook takes 0.4 s to make
    (the hook's module and botocore's data loading on a loaded machine), so its first call is late."""
    fake = FakeSageMaker()
    start_delay: float = request.param

    def hook(_: HeteroTrainingTrigger) -> FakeHook:
        time.sleep(start_delay)  # the watcher makes its hook in a thread: the event loop goes on
        return FakeHook(fake)

    monkeypatch.setattr(HeteroTrainingTrigger, "make_hook", hook)
    # call counts must not depend on how slow the machine is: no refresh unless a test asks for it
    monkeypatch.setattr("airflow_hetero.triggers.watcher.REFRESH_INTERVALS", 10**6)
    return fake


async def wait_all(triggers: list[HeteroTrainingTrigger], timeout: float = 20) -> list[dict[str, Any]]:
    async def first(t: HeteroTrainingTrigger) -> dict[str, Any]:
        async for event in t.run():
            return dict(event.payload)
        raise AssertionError("no event")

    return await asyncio.wait_for(asyncio.gather(*(first(t) for t in triggers)), timeout)


async def until(condition: Callable[[], bool], timeout: float = 20) -> None:
    """Wait for ``condition`` (checked every 10 ms): progress, not elapsed time, on a loaded machine."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def triggers(names: list[str], **kwargs: Any) -> list[HeteroTrainingTrigger]:
    kwargs.setdefault("poll_interval", 0.02)
    return [HeteroTrainingTrigger(name, **kwargs) for name in names]


async def test_many_triggers_share_one_client_and_list_instead_of_describing(
    service: FakeSageMaker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="airflow_hetero.triggers.watcher")
    names = [f"job-{i}" for i in range(250)]  # more than two pages of ListTrainingJobs
    for name in names:
        service.add(name)
    waiting = asyncio.ensure_future(wait_all(triggers(names, poll_interval=0.05)))
    # several intervals: every job described once, then only listed
    await until(lambda: service.calls["ListTrainingJobs"] >= 15)  # at least 5 intervals (1-3 pages each)
    assert service.calls["DescribeTrainingJob"] == len(names)
    for name in names[:3]:
        service.move(name, "InProgress", "Training")
    listed = service.calls["ListTrainingJobs"]
    await until(lambda: service.calls["ListTrainingJobs"] >= listed + 6)  # at least two more intervals
    assert service.calls["DescribeTrainingJob"] == len(names) + 3  # only the changed jobs
    for name in names:
        service.move(name, "Completed", "Completed")
    events = await waiting
    assert {e["job_status"] for e in events} == {"Completed"}
    assert service.clients_opened == 1
    assert service.calls["DescribeTrainingJob"] == 2 * len(names) + 3
    await until(lambda: not _by_loop.get(asyncio.get_running_loop()))  # the last trigger gone: watcher gone
    said = [r.getMessage() for r in caplog.records if r.name == "airflow_hetero.triggers.watcher"]
    assert not said  # every ListTrainingJobs accepted: no fallback, no cut-short list


def test_the_fake_refuses_what_sagemaker_refuses() -> None:
    with pytest.raises(ClientError, match=r"at 'sortBy' failed .* enum value set: \[Name, CreationTime, Status\]"):
        check_request("ListTrainingJobs", {"SortBy": "LastModifiedTime", "MaxResults": 100})
    with pytest.raises(ClientError, match=r"at 'maxResults' failed .* less than or equal to 100"):
        check_request("ListTrainingJobs", {"MaxResults": 500})
    with pytest.raises(ParamValidationError, match='Unknown parameter in input: "Sort"'):
        check_request("ListTrainingJobs", {"Sort": "CreationTime"})
    with pytest.raises(ParamValidationError, match="LastModifiedTimeAfter"):
        check_request("ListTrainingJobs", {"LastModifiedTimeAfter": "yesterday"})
    with pytest.raises(ClientError, match="at 'trainingJobName' failed to satisfy constraint"):
        check_request("DescribeTrainingJob", {"TrainingJobName": "no_underscores"})
    check_request("ListTrainingJobs", {"SortBy": "CreationTime", "LastModifiedTimeAfter": datetime.now(UTC)})


async def test_triggers_started_at_different_times_share_one_listing_per_interval(service: FakeSageMaker) -> None:
    interval = 0.2
    names = ["a", "b", "c"]
    for name in names:
        service.add(name)
    waiting = []
    for name in names:  # each starts a third of an interval after the one before
        waiting.append(asyncio.ensure_future(wait_all(triggers([name], poll_interval=interval))))
        await asyncio.sleep(interval / 3)
    await until(lambda: service.calls["DescribeTrainingJob"] == len(names))
    loop = asyncio.get_running_loop()
    listings, started = service.calls["ListTrainingJobs"], loop.time()
    await asyncio.sleep(10 * interval)
    listed = service.calls["ListTrainingJobs"] - listings
    # one listing (one page) per interval for the three; one per start cohort was about three times as many
    assert 1 <= listed <= (loop.time() - started) / interval + 2
    assert service.calls["DescribeTrainingJob"] == len(names)  # nothing changed: the listing told
    for name in names:
        service.move(name, "Completed", "Completed")
    events = await asyncio.wait_for(asyncio.gather(*waiting), 20)
    assert [e[0]["job_status"] for e in events] == ["Completed"] * 3
    assert service.calls["DescribeTrainingJob"] == 2 * len(names)  # each change described once


async def test_a_list_cut_short_describes_the_jobs_it_did_not_reach(
    service: FakeSageMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("airflow_hetero.triggers.watcher.LIST_MAX_PAGES", 1)
    names = [f"job-{i}" for i in range(250)]  # three pages of changes, one page allowed
    for name in names:
        service.add(name)
    for job in service.jobs.values():
        job["LastModifiedTime"] = service.clock  # all changed within the list's overlap: all listed
    waiting = asyncio.ensure_future(wait_all(triggers(names, poll_interval=0.05)))
    await until(lambda: service.calls["ListTrainingJobs"] >= 4)
    await until(lambda: service.described["job-0"] >= 4)
    # newest created first: the page showed jobs 150-249 unchanged; 0-149 are described every interval
    assert {service.described[n] for n in names[150:]} == {1}
    assert min(service.described[n] for n in names[:150]) >= 2
    service.move("job-0", "Completed", "Completed")
    service.move("job-249", "Completed", "Completed")
    for name in names[1:249]:
        service.move(name, "Stopped", "Stopped")
    events = {e["job_name"]: e["job_status"] for e in await waiting}
    assert events["job-0"] == events["job-249"] == "Completed"


async def test_an_unchanged_job_is_described_again_at_the_refresh_intervals_th_poll(
    service: FakeSageMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # described again and again though nothing changed: the list's eventual consistency is not trusted forever.
    # Each answer comes a little after its poll started: counted from the answer with no leeway, the refresh
    # came one poll late (every 11th poll for 10). A loaded machine starts polls late (each an interval after
    # the previous one's start), so refresh_after's time may pass a poll sooner: 9 or 10, never 11
    monkeypatch.setattr("airflow_hetero.triggers.watcher.REFRESH_INTERVALS", REFRESH_INTERVALS)
    service.add("quiet")
    waiting = asyncio.ensure_future(wait_all(triggers(["quiet"], poll_interval=0.1)))
    await until(lambda: len(service.described_at) >= 3)
    service.move("quiet", "Completed", "Completed")
    await waiting
    first, second, third = service.described_at[:3]
    pairs = ((first, second), (second, third))
    polls = [sum(1 for at in service.listed_at if earlier < at <= later) for earlier, later in pairs]
    assert all(REFRESH_INTERVALS - 1 <= n <= REFRESH_INTERVALS for n in polls), polls  # its own poll lists too
    assert all(later - earlier >= refresh_after(0.1) for earlier, later in pairs), pairs


async def test_a_slow_describe_does_not_bring_the_next_refresh_closer(
    service: FakeSageMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # REFRESH_INTERVALS count from a Describe's answer: the first one here takes most of that time (a new
    # client's first call on a loaded machine), the next ones none. Counted from the poll that asked, the
    # refresh came right after the slow answer (0.36 s after it for 2.0 s, against the offline endpoint)
    monkeypatch.setattr("airflow_hetero.triggers.watcher.REFRESH_INTERVALS", REFRESH_INTERVALS)
    interval = 0.02
    service.describe_delays = [0.8 * REFRESH_INTERVALS * interval]
    service.add("slow")
    waiting = asyncio.ensure_future(wait_all(triggers(["slow"], poll_interval=interval)))
    await until(lambda: len(service.described_at) >= 3)
    service.move("slow", "Completed", "Completed")
    await waiting
    gaps = [later - earlier for earlier, later in itertools.pairwise(service.described_at[:3])]
    assert all(gap >= refresh_after(interval) - 1e-9 for gap in gaps), gaps


async def test_listing_not_allowed_falls_back_to_describing_each_job(service: FakeSageMaker) -> None:
    service.list_error = client_error("AccessDeniedException")
    for name in ("a", "b"):
        service.add(name)
    waiting = asyncio.ensure_future(wait_all(triggers(["a", "b"])))
    await until(lambda: service.calls["DescribeTrainingJob"] >= 2 * 5)  # five intervals, both jobs described
    assert service.calls["ListTrainingJobs"] == 1  # asked once, then never again
    service.move("a", "Failed", "Failed")
    service.move("b", "Stopped", "Stopped")
    events = {e["job_name"]: e["job_status"] for e in await waiting}
    assert events == {"a": "Failed", "b": "Stopped"}


async def test_a_failing_list_means_describing_due_jobs_for_that_interval(service: FakeSageMaker) -> None:
    service.add("x")
    waiting = asyncio.ensure_future(wait_all(triggers(["x"])))
    await until(lambda: service.calls["ListTrainingJobs"] >= 1)  # described once, listed since
    before = service.calls["DescribeTrainingJob"]
    service.list_error = client_error("ThrottlingException")
    service.move("x", "Completed", "Completed")
    events = await waiting
    assert events[0]["job_status"] == "Completed"
    assert service.calls["DescribeTrainingJob"] == before + 1
    assert service.calls["ListTrainingJobs"] >= 2  # it was still asked (and retried) after failing


async def test_a_missing_job_ends_only_its_own_trigger(service: FakeSageMaker) -> None:
    service.add("real")
    waiting = asyncio.ensure_future(wait_all(triggers(["ghost"])))
    real = asyncio.ensure_future(wait_all(triggers(["real"])))
    (ghost_event,) = await waiting
    assert ghost_event["status"] == "error"
    service.move("real", "Completed", "Completed")
    (real_event,) = await real
    assert real_event["status"] == "done"


async def test_connections_and_configs_get_their_own_watchers(service: FakeSageMaker) -> None:
    def key(conn: str, region: str | None = None, config: dict[str, Any] | None = None) -> Any:
        trigger = HeteroTrainingTrigger("j", aws_conn_id=conn, region_name=region, botocore_config=config)
        return trigger.aws_settings_key()

    key_a, key_b, key_c = key("aws_a"), key("aws_b"), key("aws_a", config={"retries": {"mode": "standard"}})
    watchers = {JobWatcher.shared(k, lambda: FakeHook(service), FAST) for k in (key_a, key_b, key_c, key_a)}
    assert len(watchers) == 3
    assert key("c", "r", {"a": 1, "b": 2}) == key("c", "r", {"b": 2, "a": 1})


async def test_two_triggers_on_one_job_both_get_the_answer(service: FakeSageMaker) -> None:
    service.add("same")
    waiting = asyncio.ensure_future(wait_all(triggers(["same", "same"])))
    await asyncio.sleep(0.05)
    service.move("same", "Completed", "Completed")
    events = await waiting
    assert [e["job_status"] for e in events] == ["Completed", "Completed"]


async def test_a_deadline_passing_while_answers_arrive_ends_the_wait_with_the_last_state(
    service: FakeSageMaker,
) -> None:
    service.add("slow")
    service.move("slow", "InProgress", "Training")
    started = asyncio.get_running_loop().time()
    (t,) = triggers(["slow"], deadline=time.time() + 0.4)
    (event,) = await wait_all([t])
    waited = asyncio.get_running_loop().time() - started
    assert event["status"] == "timeout" and event["job_status"] == "InProgress"
    assert event["secondary_status"] == "Training"
    assert 0.35 <= waited < 5


async def test_the_jobs_own_limits_move_the_deadline_once_it_is_described(service: FakeSageMaker) -> None:
    service.add("old")
    # created two hours ago with a one-hour limit: past CreationTime + MaxRuntime + margin
    service.jobs["old"]["CreationTime"] = datetime.now(UTC) - timedelta(hours=2)
    service.jobs["old"]["StoppingCondition"] = {"MaxRuntimeInSeconds": 60}
    (t,) = triggers(["old"], started_at=time.time())
    (event,) = await wait_all([t], timeout=5)  # the task's own start alone would allow a day
    assert event["status"] == "timeout" and event["job_status"] == "InProgress"


@pytest.mark.parametrize("hook_delay", [2.5], ids=["hook-slower-than-two-seconds"])
async def test_a_deadline_already_passed_waits_for_the_first_check_to_give_the_jobs_state(
    monkeypatch: pytest.MonkeyPatch, hook_delay: float
) -> None:
    # a loaded triggerer can take seconds to make its client; the timeout event must still say the
    # job's state (it once gave up after two seconds with job_status None)
    fake = FakeSageMaker()
    fake.add("late")
    fake.move("late", "InProgress", "Training")

    def slow_hook(_: HeteroTrainingTrigger) -> FakeHook:
        time.sleep(hook_delay)
        return FakeHook(fake)

    monkeypatch.setattr(HeteroTrainingTrigger, "make_hook", slow_hook)
    (event,) = await wait_all(triggers(["late"], deadline=time.time() - 1), timeout=60)
    assert event["status"] == "timeout"
    assert (event["job_status"], event["secondary_status"]) == ("InProgress", "Training")


async def test_a_deadline_already_passed_ends_at_the_first_error_reply(service: FakeSageMaker) -> None:
    # nothing to wait for once the service has answered with an error: the timeout comes at once,
    # not after FIRST_CHECK_WAIT (the job is not known yet, so it has no state)
    started = asyncio.get_running_loop().time()
    (event,) = await wait_all(
        triggers(["never-made"], deadline=time.time() - 1, created_at=time.time(), not_found_grace_seconds=600)
    )
    assert event["status"] == "timeout" and event["job_status"] is None
    assert asyncio.get_running_loop().time() - started < FIRST_CHECK_WAIT / 2
