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
* a DescribeTrainingJob anyway for a job not described for ``REFRESH_INTERVALS`` intervals: at the
  10th poll after the one that described it, and never sooner than :func:`refresh_after` after that
  answer, however slow it was (a safety net for the list's eventual consistency);
* if listing is not allowed (an IAM policy that grants only DescribeTrainingJob, say), or fails
  for one interval, every due job is described instead: never worse than polling each job.

Triggers receive each new DescribeTrainingJob answer (or the exception it raised) through
:meth:`JobWatcher.subscribe`; what an answer means stays with the trigger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_hetero._retry import RetryPolicy, is_transient
from airflow_hetero.triggers.poller import SharedPoller, Update, WatchedJob

if TYPE_CHECKING:
    # equal for triggers whose hooks reach the same service the same way: they share a watcher
    from airflow_hetero.task_arguments import AwsSettingsKey as WatchKey

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


def refresh_after(interval: float) -> float:
    """Seconds after a job's last DescribeTrainingJob answer from which a poll describes it again.

    Polls start an interval apart and an answer comes some time after its poll started, so a threshold of
    exactly ``REFRESH_INTERVALS`` intervals would be crossed only at the poll after that (every 11th):
    half an interval's leeway makes it the ``REFRESH_INTERVALS``-th poll while an answer takes less than
    half an interval, and a slower answer still delays the refresh (it never comes right after it).
    """
    return (REFRESH_INTERVALS - 0.5) * interval


@dataclass(eq=False)
class Subscription:
    """One trigger's view of one job: new answers arrive on ``updates``."""

    job_name: str
    interval: float
    updates: asyncio.Queue[Update] = field(default_factory=asyncio.Queue)


@dataclass(eq=False)
class _Job(WatchedJob[Subscription]):
    """``checked_at``: loop time of the last check (listed or described)."""

    name: str
    summary: tuple[Any, ...] | None = None  # status, secondary status, last modified: from the last answer
    described_at: float | None = None  # loop time of the last successful DescribeTrainingJob


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


class JobWatcher(
    SharedPoller[_Job],
    what="Training-job watcher",
    task_prefix="hetero-watcher",
    calls=("DescribeTrainingJob", "ListTrainingJobs"),
):
    """Polls every watched job of one connection for one event loop (see the module docstring)."""

    def __init__(self, key: WatchKey, make_hook: Callable[[], Any], retry_policy: RetryPolicy) -> None:
        super().__init__(key, make_hook, retry_policy)
        self._list_retry = RetryPolicy(max_attempts=2, base_delay=retry_policy.base_delay, max_delay=1.0)
        self._listing = True
        self._newest_change: datetime | None = None
        self._listed_at: datetime | None = None

    def subscribe(self, job_name: str, interval: float) -> AbstractAsyncContextManager[Subscription]:
        """Watch ``job_name`` (answers on the subscription's queue) until the block is left."""
        return self._watching(job_name, lambda: _Job(name=job_name), Subscription(job_name, float(interval)))

    @property
    def watched(self) -> int:
        """How many jobs are being watched."""
        return len(self._jobs)

    async def _poll(self, client: Any, now: float) -> None:
        due = [job for job in self._jobs.values() if job.is_due(now)]
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
            is_due = job.is_due(now)
            stale = is_due and now - job.described_at >= refresh_after(job.interval)
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
                page = await self._call(
                    client.list_training_jobs, "ListTrainingJobs", policy=self._list_retry, **kwargs
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
                answer: dict[str, Any] = await self._call(
                    client.describe_training_job, "DescribeTrainingJob", job.name, TrainingJobName=job.name
                )
            except Exception as exc:
                job.checked_at = now
                job.deliver(exc)
                return
        job.checked_at = now
        # described as of its answer, not of the poll's start: a slow Describe (a new client's first, a
        # loaded machine's) does not bring the next refresh closer (it came at once after such a one)
        job.described_at = asyncio.get_running_loop().time()
        job.summary = _summary(answer)
        modified = answer.get("LastModifiedTime")
        if isinstance(modified, datetime) and (self._newest_change is None or modified > self._newest_change):
            self._newest_change = modified
        job.deliver(answer)


#: loop -> settings -> watcher (the tests see a watcher go with its last trigger here)
_by_loop = JobWatcher.registry
