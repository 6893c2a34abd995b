"""One poller for every deferred service job of a triggerer: one listing per queue per interval.

As :class:`~airflow_hetero.triggers.watcher.JobWatcher` does for training jobs, a :class:`QueueWatcher` is shared
by every service-job trigger of one event loop and connection (:meth:`QueueWatcher.shared`):

* one async Batch client for all of them;
* one DescribeServiceJob when a job is first watched (its ``createdAt`` bounds the listing);
* then, once per interval and queue, one ``ListServiceJobs(jobQueue, filters=[AFTER_CREATED_AT])`` (every status:
  with a filter Batch ignores ``jobStatus``; without one it would list only RUNNING jobs), paged up to
  ``LIST_MAX_PAGES``, whose summaries carry each job's status, reason and latest attempt; it answers for every
  watched job of the queue, due or not, so triggers started at different times share one listing per interval;
* a DescribeServiceJob only for a due job the listing did not show (a list cut short, a failed listing);
* one GetJobQueueSnapshot per queue and interval while a watched job of it is RUNNABLE, for its place.

Triggers receive each summary (with ``place`` added for a RUNNABLE job) or exception through
:meth:`QueueWatcher.subscribe`; what it means stays with the trigger.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_hetero._retry import RetryPolicy, acall_with_retry

if TYPE_CHECKING:
    from airflow_hetero.hooks.aws_settings import AwsSettingsKey

log = logging.getLogger(__name__)

#: Pages of one queue's listing (100 summaries each); the watched jobs it did not reach are described.
LIST_MAX_PAGES = 20
#: The listing starts this long before the oldest watched job's ``createdAt`` (clock differences).
LIST_OVERLAP_MS = 60_000
#: DescribeServiceJob calls in flight at once per watcher.
DESCRIBE_CONCURRENCY = 16

_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[AwsSettingsKey, QueueWatcher]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(eq=False)
class QueueSubscription:
    """One trigger's view of one service job: summaries (or errors) arrive on ``updates``."""

    job_id: str
    queue: str
    interval: float
    updates: asyncio.Queue[dict[str, Any] | BaseException] = field(default_factory=asyncio.Queue)


@dataclass(eq=False)
class _Job:
    job_id: str
    queue: str
    subscribers: list[QueueSubscription] = field(default_factory=list)
    created_at: int | None = None  # ms, from the first describe
    checked_at: float = float("-inf")

    @property
    def interval(self) -> float:
        return min(s.interval for s in self.subscribers)


class QueueWatcher:
    """Polls every watched service job of one connection for one event loop (see the module docstring)."""

    def __init__(self, key: AwsSettingsKey, make_hook: Callable[[], Any], retry_policy: RetryPolicy) -> None:
        self.key = key
        self._make_hook = make_hook
        self._retry = retry_policy
        self._jobs: dict[str, _Job] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.calls: dict[str, int] = {"DescribeServiceJob": 0, "ListServiceJobs": 0, "GetJobQueueSnapshot": 0}

    @classmethod
    def shared(cls, key: AwsSettingsKey, make_hook: Callable[[], Any], retry_policy: RetryPolicy) -> QueueWatcher:
        """The watcher of the running event loop for ``key`` (created on first use)."""
        watchers = _by_loop.setdefault(asyncio.get_running_loop(), {})
        watcher = watchers.get(key)
        if watcher is None:
            watcher = watchers[key] = cls(key, make_hook, retry_policy)
        return watcher

    @contextlib.asynccontextmanager
    async def subscribe(self, job_id: str, queue: str, interval: float) -> AsyncIterator[QueueSubscription]:
        """Watch service job ``job_id`` of ``queue`` until the block is left."""
        sub = QueueSubscription(job_id, queue, float(interval))
        job = self._jobs.setdefault(job_id, _Job(job_id, queue))
        job.subscribers.append(sub)
        job.checked_at = float("-inf")
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"hetero-queue-watcher-{id(self)}")
        try:
            yield sub
        finally:
            job.subscribers.remove(sub)
            if not job.subscribers:
                self._jobs.pop(job_id, None)
            self._wake.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._jobs:
                try:
                    hook = await asyncio.to_thread(self._make_hook)
                    async with await hook.async_client() as client:
                        while self._jobs:
                            self._wake.clear()
                            await self._poll(client, loop.time())
                            await self._sleep(loop)
                except Exception as exc:  # no client: tell every trigger, try again
                    log.warning("Service-job watcher for connection %s: %s", self.key[0], exc)
                    for job in list(self._jobs.values()):
                        job.checked_at = loop.time()
                        self._deliver(job, exc)
                    await self._sleep(loop)
        finally:
            watchers = _by_loop.get(loop)
            if watchers is not None and watchers.get(self.key) is self and not self._jobs:
                del watchers[self.key]

    async def _sleep(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._jobs:
            return
        delay = min(job.checked_at + job.interval for job in self._jobs.values()) - loop.time()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    async def _poll(self, client: Any, now: float) -> None:
        due = {job.job_id for job in self._jobs.values() if now >= job.checked_at + job.interval - 1e-3}
        by_queue: dict[str, list[_Job]] = {}
        for job in self._jobs.values():
            by_queue.setdefault(job.queue, []).append(job)
        for queue, jobs in by_queue.items():
            if any(j.job_id in due for j in jobs):
                await self._check_queue(client, queue, jobs, due, now)

    async def _check_queue(self, client: Any, queue: str, watched: list[_Job], due: set[str], now: float) -> None:
        """One listing of ``queue`` for every ``watched`` job of it (those not ``due`` yet too: the listing shows
        them at no cost, and checking them now keeps one listing per queue per interval however the triggers
        started), a describe for the due ones it did not show, the places."""
        known = [j for j in watched if j.created_at is not None]
        listed = await self._list(client, queue, known) if known else {}
        jobs = [j for j in watched if j.subscribers]  # a trigger may have left while the listing ran
        limit = asyncio.Semaphore(DESCRIBE_CONCURRENCY)

        async def answer(job: _Job) -> dict[str, Any] | BaseException | None:
            found = listed.get(job.job_id)
            if found is None and job.job_id not in due:
                return None  # not listed and not due: its own turn comes
            job.checked_at = now
            if found is not None:
                return found
            async with limit:
                return await self._describe(client, job)

        answers = dict(zip((j.job_id for j in jobs), await asyncio.gather(*(answer(j) for j in jobs)), strict=True))
        runnable = [a for a in answers.values() if isinstance(a, dict) and a.get("status") == "RUNNABLE"]
        places = await self._places(client, queue) if runnable else {}
        for job in jobs:
            item = answers[job.job_id]
            if item is None:
                continue
            if isinstance(item, dict) and item.get("status") == "RUNNABLE" and places is not None:
                item = {**item, "place": places.get(str(item.get("jobArn")), 0)}
            self._deliver(job, item)

    async def _list(self, client: Any, queue: str, jobs: list[_Job]) -> dict[str, dict[str, Any]]:
        """The summaries of ``queue``'s jobs created since the oldest watched one (empty when listing fails)."""
        since = min(j.created_at or 0 for j in jobs) - LIST_OVERLAP_MS
        kwargs: dict[str, Any] = {"jobQueue": queue, "filters": [{"name": "AFTER_CREATED_AT", "values": [str(since)]}]}
        found: dict[str, dict[str, Any]] = {}
        try:
            for _ in range(LIST_MAX_PAGES):
                self.calls["ListServiceJobs"] += 1
                page = await acall_with_retry(
                    client.list_service_jobs, policy=self._retry, what=f"ListServiceJobs {queue}", **kwargs
                )
                watched = {j.job_id for j in jobs}
                found.update(
                    (str(i["jobId"]), dict(i)) for i in page.get("jobSummaryList") or [] if i["jobId"] in watched
                )
                token = page.get("nextToken")
                if not token:
                    break
                kwargs["nextToken"] = token
        except Exception as exc:
            log.warning("ListServiceJobs %s failed (%s): describing each watched job this interval", queue, exc)
        return found

    async def _describe(self, client: Any, job: _Job) -> dict[str, Any] | BaseException:
        try:
            self.calls["DescribeServiceJob"] += 1
            answer: dict[str, Any] = await acall_with_retry(
                client.describe_service_job,
                policy=self._retry,
                what=f"DescribeServiceJob {job.job_id}",
                jobId=job.job_id,
            )
        except Exception as exc:
            return exc
        job.created_at = answer.get("createdAt") or job.created_at
        return answer

    async def _places(self, client: Any, queue: str) -> dict[str, int] | None:
        """Job ARN -> 1-based place at the front of ``queue``; None when the snapshot cannot be read."""
        try:
            self.calls["GetJobQueueSnapshot"] += 1
            snapshot = await acall_with_retry(
                client.get_job_queue_snapshot, policy=self._retry, what=f"GetJobQueueSnapshot {queue}", jobQueue=queue
            )
        except Exception as exc:
            log.info("Could not read the front of queue %s: %s", queue, exc)
            return None
        jobs = (snapshot.get("frontOfQueue") or {}).get("jobs") or []
        return {str(j.get("jobArn")): index for index, j in enumerate(jobs, start=1)}

    @staticmethod
    def _deliver(job: _Job, item: dict[str, Any] | BaseException) -> None:
        for sub in job.subscribers:
            sub.updates.put_nowait(item)
