"""One status poller for every deferred training job of a triggerer: shared client, batched checks.

A triggerer runs all its triggers in one event loop. Giving each trigger its own hook and async
client, and a DescribeTrainingJob per job per interval, costs ~2 MB and ~1 ms of CPU per job and
interval, and a start-up storm when hundreds of jobs defer at once. A :class:`JobWatcher` is
shared by every trigger of the same loop, connection, region, ``verify`` and botocore config:

* one async client for all of them;
* one DescribeTrainingJob when a job is first watched (its limits and deadline come from it);
* then, once per interval, one ListTrainingJobs call (``LastModifiedTimeAfter``, sorted by
  ``CreationTime`` as the API allows, paged up to ``LIST_MAX_PAGES``) for all jobs together (due or
  not: triggers started at different times share it), and a DescribeTrainingJob only for the jobs
  whose summary changed (a list cut short at the page limit
  says nothing of the jobs it did not reach: they are described);
* a DescribeTrainingJob anyway for a job not described for ``REFRESH_INTERVALS`` intervals since
  the previous answer (a safety net for the list's eventual consistency);
* if listing is not allowed (an IAM policy that grants only DescribeTrainingJob, say), or fails
  for one interval, every due job is described instead: never worse than polling each job.

Triggers receive each new DescribeTrainingJob answer (or the exception it raised) through
:meth:`JobWatcher.subscribe`; what an answer means stays with the trigger.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_hetero._retry import RetryPolicy, acall_with_retry, is_transient

if TYPE_CHECKING:
    # equal for triggers whose hooks reach the same service the same way: they share a watcher
    from airflow_hetero.hooks.aws_settings import AwsSettingsKey as WatchKey

log = logging.getLogger(__name__)


#: ListTrainingJobs looks back this far before the newest change seen: the list's lag, and the
#: difference between this machine's clock and SageMaker's.
LIST_OVERLAP = timedelta(seconds=60)
#: Pages of one listing (100 summaries each); a busier account's remaining changes are described.
LIST_MAX_PAGES = 20
#: DescribeTrainingJob calls in flight at once per watcher.
DESCRIBE_CONCURRENCY = 16
#: A job not described for this many intervals is described even without a listed change.
REFRESH_INTERVALS = 10

_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[WatchKey, JobWatcher]] = weakref.WeakKeyDictionary()


@dataclass(eq=False)
class Subscription:
    """One trigger's view of one job: new answers arrive on ``updates``."""

    job_name: str
    interval: float
    updates: asyncio.Queue[dict[str, Any] | BaseException] = field(default_factory=asyncio.Queue)


@dataclass(eq=False)
class _Job:
    name: str
    subscribers: list[Subscription] = field(default_factory=list)
    summary: tuple[Any, ...] | None = None  # status, secondary status, last modified: from the last answer
    described_at: float | None = None  # loop time of the last successful DescribeTrainingJob
    checked_at: float = float("-inf")  # loop time of the last check (listed or described)

    @property
    def interval(self) -> float:
        return min(s.interval for s in self.subscribers)


@dataclass
class _Listing:
    """One listing's findings: the watched jobs it showed, which of them changed, whether it ended."""

    seen: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    complete: bool = False

    def tells(self, name: str) -> bool:
        """True when the listing shows job ``name`` unchanged (absent from a complete list: no change)."""
        if name in self.changed:
            return False
        return self.complete or name in self.seen


def _summary(item: dict[str, Any]) -> tuple[Any, ...]:
    return (item.get("TrainingJobStatus"), item.get("SecondaryStatus"), item.get("LastModifiedTime"))


class JobWatcher:
    """Polls every watched job of one connection for one event loop (see the module docstring)."""

    def __init__(self, key: WatchKey, make_hook: Callable[[], Any], retry_policy: RetryPolicy) -> None:
        self.key = key
        self._make_hook = make_hook
        self._retry = retry_policy
        self._list_retry = RetryPolicy(max_attempts=2, base_delay=retry_policy.base_delay, max_delay=1.0)
        self._jobs: dict[str, _Job] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._listing = True
        self._newest_change: datetime | None = None
        self._listed_at: datetime | None = None
        self.calls: dict[str, int] = {"DescribeTrainingJob": 0, "ListTrainingJobs": 0}

    @classmethod
    def shared(cls, key: WatchKey, make_hook: Callable[[], Any], retry_policy: RetryPolicy) -> JobWatcher:
        """The watcher of the running event loop for ``key`` (created on first use)."""
        watchers = _by_loop.setdefault(asyncio.get_running_loop(), {})
        watcher = watchers.get(key)
        if watcher is None:
            watcher = watchers[key] = cls(key, make_hook, retry_policy)
        return watcher

    @contextlib.asynccontextmanager
    async def subscribe(self, job_name: str, interval: float) -> AsyncIterator[Subscription]:
        """Watch ``job_name`` (answers on the subscription's queue) until the block is left."""
        sub = Subscription(job_name, float(interval))
        job = self._jobs.setdefault(job_name, _Job(job_name))
        job.subscribers.append(sub)
        job.checked_at = float("-inf")  # a new subscriber gets a fresh answer at once
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"hetero-watcher-{id(self)}")
        try:
            yield sub
        finally:
            job.subscribers.remove(sub)
            if not job.subscribers:
                self._jobs.pop(job_name, None)
            self._wake.set()

    @property
    def watched(self) -> int:
        """How many jobs are being watched."""
        return len(self._jobs)

    async def _run(self) -> None:
        """The poll loop: runs while any job is watched, with one client for all."""
        loop = asyncio.get_running_loop()
        try:
            while self._jobs:
                try:
                    # the hook's module and botocore's data load in threads: the loop never waits for them
                    hook = await asyncio.to_thread(self._make_hook)
                    async with await hook.async_client() as client:
                        while self._jobs:
                            self._wake.clear()
                            await self._poll(client, loop.time())
                            await self._sleep(loop)
                except Exception as exc:  # no client (bad connection, no credentials): tell, retry
                    log.warning("Training-job watcher for connection %s: %s", self.key[0], exc)
                    for job in list(self._jobs.values()):
                        job.checked_at = loop.time()
                        self._deliver(job, exc)
                    await self._sleep(loop)
        finally:
            watchers = _by_loop.get(loop)
            if watchers is not None and watchers.get(self.key) is self and not self._jobs:
                del watchers[self.key]

    async def _sleep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Until the next job is due, or a subscription comes or goes."""
        if not self._jobs:
            return
        delay = min(job.checked_at + job.interval for job in self._jobs.values()) - loop.time()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    async def _poll(self, client: Any, now: float) -> None:
        due = [job for job in self._jobs.values() if now >= job.checked_at + job.interval - 1e-3]
        if not due:
            return
        # never described (new, or every try failed so far): describe; the rest: list, describe changes
        fresh = [job for job in due if job.described_at is None]
        listable = len(fresh) < len(due) and self._listing and self._newest_change is not None
        listed = await self._list_changes(client) if listable else None
        to_describe = list(fresh)
        # the listing answers for every described job, due or not: triggers that started at different
        # times then share one listing per interval instead of one per start cohort
        for job in list(self._jobs.values()):
            if job.described_at is None:
                continue
            is_due = now >= job.checked_at + job.interval - 1e-3
            stale = is_due and now - job.described_at >= REFRESH_INTERVALS * job.interval
            if listed is not None and listed.tells(job.name) and not stale:
                job.checked_at = now
            elif is_due or (listed is not None and job.name in listed.changed):
                to_describe.append(job)
        if to_describe:
            limit = asyncio.Semaphore(DESCRIBE_CONCURRENCY)
            await asyncio.gather(*(self._describe(client, job, now, limit) for job in to_describe))

    async def _list_changes(self, client: Any) -> _Listing | None:
        """What one listing tells of the watched jobs; None when it could not tell anything."""
        assert self._newest_change is not None  # never list the whole account
        # changes since the newest one seen, or since the previous complete list (by this clock)
        # when that is later; the overlap covers the list's lag and the two clocks' difference
        since = max(self._newest_change, self._listed_at) if self._listed_at else self._newest_change
        started = datetime.now(UTC)
        # SortBy is Name | CreationTime | Status (not LastModifiedTime): the filter does the work
        kwargs: dict[str, Any] = {
            "MaxResults": 100,
            "SortBy": "CreationTime",
            "SortOrder": "Descending",
            "LastModifiedTimeAfter": since - LIST_OVERLAP,
        }
        listing = _Listing()
        newest = self._newest_change
        try:
            for _ in range(LIST_MAX_PAGES):
                self.calls["ListTrainingJobs"] += 1
                page = await acall_with_retry(
                    client.list_training_jobs, policy=self._list_retry, what="ListTrainingJobs", **kwargs
                )
                for item in page.get("TrainingJobSummaries", []):
                    modified = item.get("LastModifiedTime")
                    if isinstance(modified, datetime) and (newest is None or modified > newest):
                        newest = modified
                    job = self._jobs.get(item.get("TrainingJobName", ""))
                    if job is not None:
                        listing.seen.add(job.name)
                        if _summary(item) != job.summary:
                            listing.changed.add(job.name)
                token = page.get("NextToken")
                if not token or token == kwargs.get("NextToken"):
                    listing.complete = True
                    break
                kwargs["NextToken"] = token
        except Exception as exc:
            if is_transient(exc):
                log.warning("ListTrainingJobs failed (%s); describing each due job this interval", exc)
            else:
                self._listing = False
                log.warning("ListTrainingJobs is not available (%s); watching each job with DescribeTrainingJob", exc)
            return None
        if listing.complete:  # a list cut short is asked again from the same point next time
            self._newest_change, self._listed_at = newest, started
        else:
            log.info("ListTrainingJobs: over %d pages of changes; describing the jobs not reached", LIST_MAX_PAGES)
        return listing

    async def _describe(self, client: Any, job: _Job, now: float, limit: asyncio.Semaphore) -> None:
        async with limit:
            try:
                self.calls["DescribeTrainingJob"] += 1
                answer: dict[str, Any] = await acall_with_retry(
                    client.describe_training_job,
                    policy=self._retry,
                    what=f"DescribeTrainingJob {job.name}",
                    TrainingJobName=job.name,
                )
            except Exception as exc:
                job.checked_at = now
                self._deliver(job, exc)
                return
        job.checked_at = now
        # described as of its answer, not of the poll's start: a slow Describe (a new client's first, a
        # loaded machine's) does not bring the next refresh closer (it came at once after such a one)
        job.described_at = asyncio.get_running_loop().time()
        job.summary = _summary(answer)
        modified = answer.get("LastModifiedTime")
        if isinstance(modified, datetime) and (self._newest_change is None or modified > self._newest_change):
            self._newest_change = modified
        self._deliver(job, answer)

    @staticmethod
    def _deliver(job: _Job, item: dict[str, Any] | BaseException) -> None:
        for sub in job.subscribers:
            sub.updates.put_nowait(item)
