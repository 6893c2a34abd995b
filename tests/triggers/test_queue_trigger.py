"""Queue mode's triggers: many queued jobs, one listing per queue per interval; states logged; the hand-over."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from support.service_model import check_answer, check_request
from support.task_logs import record_logs

from airflow_hetero.triggers.queue import HeteroQueuedTrainingTrigger, HeteroServiceJobTrigger
from airflow_hetero.triggers.queue_watcher import _by_loop

ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/"


class FakeBatch:
    """Service jobs whose status the test moves; calls counted and checked against botocore's batch model."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.calls: Counter[str] = Counter()
        self.clients_opened = 0
        self.clock = 1_767_225_600_000
        self.terminated: list[tuple[str, str]] = []

    def add(self, job_id: str, queue: str = "gpu-queue") -> None:
        self.clock += 1000
        self.jobs[job_id] = {
            "jobId": job_id,
            "jobName": f"name-{job_id}",
            "jobArn": f"arn:aws:batch:us-east-1:123456789012:job/{job_id}",
            "jobQueue": queue,
            "serviceJobType": "SAGEMAKER_TRAINING",
            "status": "RUNNABLE",
            "statusReason": "Waiting for capacity",
            "createdAt": self.clock,
            "startedAt": self.clock,
        }

    def move(self, job_id: str, status: str, attempt: int | None = None) -> None:
        job = self.jobs[job_id]
        job["status"] = status
        job.pop("statusReason", None)
        if attempt is not None:
            value = f"{ARN}AWSBatchname-{job_id}{attempt:032x}"
            job["latestAttempt"] = {"serviceResourceId": {"name": "TrainingJobArn", "value": value}}

    async def describe_service_job(self, **kwargs: Any) -> dict[str, Any]:
        self.calls["DescribeServiceJob"] += 1
        check_request("DescribeServiceJob", kwargs, "batch")
        await asyncio.sleep(0)
        answer = dict(self.jobs[kwargs["jobId"]])
        check_answer("DescribeServiceJob", answer, "batch")
        return answer

    async def list_service_jobs(self, **kwargs: Any) -> dict[str, Any]:
        self.calls["ListServiceJobs"] += 1
        check_request("ListServiceJobs", kwargs, "batch")
        await asyncio.sleep(0)
        (after,) = [int(f["values"][0]) for f in kwargs["filters"] if f["name"] == "AFTER_CREATED_AT"]
        items = sorted(
            (j for j in self.jobs.values() if j["jobQueue"] == kwargs["jobQueue"] and j["createdAt"] > after),
            key=lambda j: -j["createdAt"],
        )
        start = int(kwargs.get("nextToken") or 0)
        page = items[start : start + kwargs.get("maxResults", 100)]
        keys = ("jobId", "jobName", "jobArn", "serviceJobType", "status", "statusReason", "latestAttempt", "createdAt")
        answer: dict[str, Any] = {"jobSummaryList": [{k: j[k] for k in keys if k in j} for j in page]}
        if start + len(page) < len(items):
            answer["nextToken"] = str(start + len(page))
        check_answer("ListServiceJobs", answer, "batch")
        return answer

    async def get_job_queue_snapshot(self, **kwargs: Any) -> dict[str, Any]:
        self.calls["GetJobQueueSnapshot"] += 1
        check_request("GetJobQueueSnapshot", kwargs, "batch")
        runnable = [j for j in self.jobs.values() if j["status"] == "RUNNABLE" and j["jobQueue"] == kwargs["jobQueue"]]
        runnable.sort(key=lambda j: j["createdAt"])
        return {"frontOfQueue": {"jobs": [{"jobArn": j["jobArn"]} for j in runnable[:100]]}}

    async def terminate_service_job(self, **kwargs: Any) -> dict[str, Any]:
        check_request("TerminateServiceJob", kwargs, "batch")
        self.terminated.append((kwargs["jobId"], kwargs["reason"]))
        return {}


class FakeHook:
    def __init__(self, service: FakeBatch) -> None:
        self.service = service

    async def async_client(self) -> Any:
        service = self.service

        @contextlib.asynccontextmanager
        async def conn() -> AsyncIterator[FakeBatch]:
            service.clients_opened += 1
            yield service

        return conn()


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> FakeBatch:
    fake = FakeBatch()
    monkeypatch.setattr(HeteroServiceJobTrigger, "make_batch_hook", lambda _: FakeHook(fake))
    monkeypatch.setattr(HeteroQueuedTrainingTrigger, "make_batch_hook", lambda _: FakeHook(fake))
    return fake


async def until(condition: Callable[[], bool], timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def first_event(trigger: HeteroServiceJobTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("no event")


def trigger(job_id: str, **kwargs: Any) -> HeteroServiceJobTrigger:
    kwargs.setdefault("poll_interval", 0.05)
    kwargs.setdefault("job_queue", "gpu-queue")
    return HeteroServiceJobTrigger(job_id, job_name=f"name-{job_id}", aws_conn_id=None, **kwargs)


async def test_many_queued_jobs_one_listing_per_queue_per_interval(service: FakeBatch) -> None:
    ids = [f"id-{i}" for i in range(150)]  # two pages of one queue
    for job_id in ids[:140]:
        service.add(job_id)
    for job_id in ids[140:]:
        service.add(job_id, queue="cpu-queue")
    queues = {job_id: service.jobs[job_id]["jobQueue"] for job_id in ids}
    waiting = asyncio.ensure_future(asyncio.gather(*(first_event(trigger(j, job_queue=queues[j])) for j in ids)))
    await until(lambda: service.calls["GetJobQueueSnapshot"] >= 10)  # several intervals
    assert service.calls["DescribeServiceJob"] == len(ids)  # once each, when first watched
    snapshots = service.calls["GetJobQueueSnapshot"]
    listings = service.calls["ListServiceJobs"]
    # per interval: gpu-queue 2 pages + cpu-queue 1 page, one snapshot per queue (the first interval only describes)
    assert listings <= (snapshots // 2) * 3
    for job_id in ids:
        service.move(job_id, "RUNNING", attempt=1)
    events = await asyncio.wait_for(waiting, 20)
    assert {e["status"] for e in events} == {"attempt"}
    assert events[0]["training_job"] == f"AWSBatchname-id-0{1:032x}"
    assert service.calls["DescribeServiceJob"] == len(ids)  # never again: the listing told
    assert service.clients_opened == 1
    await until(lambda: not _by_loop.get(asyncio.get_running_loop()))


async def test_triggers_started_at_different_times_share_one_listing_per_interval(service: FakeBatch) -> None:
    interval = 0.2
    for job_id in ("a", "b", "c"):
        service.add(job_id)
    waiting = []
    for job_id in ("a", "b", "c"):  # each starts a third of an interval after the one before
        waiting.append(asyncio.ensure_future(first_event(trigger(job_id, poll_interval=interval))))
        await asyncio.sleep(interval / 3)
    await until(lambda: service.calls["DescribeServiceJob"] == 3)
    loop = asyncio.get_running_loop()
    listings, started = service.calls["ListServiceJobs"], loop.time()
    await asyncio.sleep(10 * interval)
    listed = service.calls["ListServiceJobs"] - listings
    # one listing per interval for the three (a listing per start cohort would be about three times as many)
    assert 1 <= listed <= (loop.time() - started) / interval + 2
    for job_id in ("a", "b", "c"):
        service.move(job_id, "RUNNING", attempt=1)
    events = await asyncio.wait_for(asyncio.gather(*waiting), 20)
    assert [e["status"] for e in events] == ["attempt"] * 3
    assert service.calls["DescribeServiceJob"] == 3  # never again: the listing told


async def test_states_are_logged_once_with_the_place_and_a_followed_attempt_is_waited_past(service: FakeBatch) -> None:
    service.add("a")
    service.add("b")
    watching = trigger("b", after_attempt=f"AWSBatchname-b{1:032x}")
    logs = record_logs(watching)
    waiting = asyncio.ensure_future(first_event(watching))
    await until(lambda: service.calls["GetJobQueueSnapshot"] >= 3)
    service.move("b", "RUNNING", attempt=1)  # the attempt already followed: no event
    await until(lambda: service.calls["ListServiceJobs"] >= 4)
    assert not waiting.done()
    service.move("b", "RUNNING", attempt=2)
    event = await asyncio.wait_for(waiting, 20)
    assert event["status"] == "attempt" and event["training_job"] == f"AWSBatchname-b{2:032x}"
    said = [line for line in logs.lines if "Service job name-b" in line]
    assert said[0] == "Service job name-b: RUNNABLE (Waiting for capacity), place 2 in the queue"
    assert said.count(said[0]) == 1  # a state is said once


async def test_the_end_fires_done_and_a_kill_terminates(service: FakeBatch) -> None:
    service.add("a")
    service.move("a", "FAILED")
    service.jobs["a"]["statusReason"] = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - too large"
    event = await asyncio.wait_for(first_event(trigger("a")), 20)
    assert event["status"] == "done" and event["job_status"] == "FAILED"
    assert "MISCONFIGURATION" in event["status_reason"]
    await trigger("a", stop_on_kill=True).on_kill()
    await HeteroQueuedTrainingTrigger("t", service_job_id="a", aws_conn_id=None, stop_on_kill=True).on_kill()
    assert [j for j, _ in service.terminated] == ["a", "a"]
    await trigger("a", stop_on_kill=False).on_kill()
    assert len(service.terminated) == 2


def test_serialized_kwargs_build_the_same_trigger() -> None:
    t = trigger("a", after_attempt="x", stop_on_kill=True)
    path, kwargs = t.serialize()
    again = HeteroServiceJobTrigger(**kwargs)
    assert again.serialize() == (path, kwargs)
    q = HeteroQueuedTrainingTrigger("t", service_job_id="a", aws_conn_id=None, stop_on_kill=True)
    path, kwargs = q.serialize()
    assert path == "airflow_hetero.triggers.queue.HeteroQueuedTrainingTrigger"
    assert HeteroQueuedTrainingTrigger(**kwargs).serialize() == (path, kwargs)
