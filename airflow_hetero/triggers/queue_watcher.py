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
import logging
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from airflow_hetero.triggers.poller import SharedPoller, Update, WatchedJob

log = logging.getLogger(__name__)

#: Pages of one queue's listing (100 summaries each); the watched jobs it did not reach are described.
LIST_MAX_PAGES = 20
#: The listing starts this long before the oldest watched job's ``createdAt`` (clock differences).
LIST_OVERLAP_MS = 60_000
#: DescribeServiceJob calls in flight at once per watcher.
DESCRIBE_CONCURRENCY = 16


@dataclass(eq=False)
class QueueSubscription:
    """One trigger's view of one service job: summaries (or errors) arrive on ``updates``."""

    job_id: str
    queue: str
    interval: float
    updates: asyncio.Queue[Update] = field(default_factory=asyncio.Queue)


@dataclass(eq=False)
class _Job(WatchedJob[QueueSubscription]):
    job_id: str
    queue: str
    created_at: int | None = None  # ms, from the first describe


class QueueWatcher(
    SharedPoller[_Job],
    what="Service-job watcher",
    task_prefix="hetero-queue-watcher",
    calls=("DescribeServiceJob", "ListServiceJobs", "GetJobQueueSnapshot"),
):
    """Polls every watched service job of one connection for one event loop (see the module docstring)."""

    def subscribe(self, job_id: str, queue: str, interval: float) -> AbstractAsyncContextManager[QueueSubscription]:
        """Watch service job ``job_id`` of ``queue`` until the block is left."""
        return self._watching(job_id, lambda: _Job(job_id, queue), QueueSubscription(job_id, queue, float(interval)))

    async def _poll(self, client: Any, now: float) -> None:
        due = {job.job_id for job in self._jobs.values() if job.is_due(now)}
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
            job.deliver(item)

    async def _list(self, client: Any, queue: str, jobs: list[_Job]) -> dict[str, dict[str, Any]]:
        """The summaries of ``queue``'s jobs created since the oldest watched one (empty when listing fails)."""
        since = min(j.created_at or 0 for j in jobs) - LIST_OVERLAP_MS
        kwargs: dict[str, Any] = {"jobQueue": queue, "filters": [{"name": "AFTER_CREATED_AT", "values": [str(since)]}]}
        found: dict[str, dict[str, Any]] = {}
        try:
            for _ in range(LIST_MAX_PAGES):
                page = await self._call(client.list_service_jobs, "ListServiceJobs", queue, **kwargs)
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
            answer: dict[str, Any] = await self._call(
                client.describe_service_job, "DescribeServiceJob", job.job_id, jobId=job.job_id
            )
        except Exception as exc:
            return exc
        job.created_at = answer.get("createdAt") or job.created_at
        return answer

    async def _places(self, client: Any, queue: str) -> dict[str, int] | None:
        """Job ARN -> 1-based place at the front of ``queue``; None when the snapshot cannot be read."""
        try:
            snapshot = await self._call(client.get_job_queue_snapshot, "GetJobQueueSnapshot", queue, jobQueue=queue)
        except Exception as exc:
            log.info("Could not read the front of queue %s: %s", queue, exc)
            return None
        jobs = (snapshot.get("frontOfQueue") or {}).get("jobs") or []
        return {str(j.get("jobArn")): index for index, j in enumerate(jobs, start=1)}


#: loop -> settings -> watcher (the tests see a watcher go with its last trigger here)
_by_loop = QueueWatcher.registry
