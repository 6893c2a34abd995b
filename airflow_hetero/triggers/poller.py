"""The part the triggerer's shared pollers have in common: one per event loop and connection, one poll loop.

:class:`~airflow_hetero.triggers.watcher.JobWatcher` (training jobs) and
:class:`~airflow_hetero.triggers.queue_watcher.QueueWatcher` (service jobs) are each shared by every trigger of
one event loop and AWS settings (:meth:`SharedPoller.shared`); a trigger watches a job for as long as it is in
:meth:`SharedPoller._watching`. The poll loop runs while any job is watched, with one async client for all: it
polls (the subclass's :meth:`SharedPoller._poll`), then sleeps until the next job is due or a trigger comes or
goes. A client that cannot be made is told to every trigger, and tried again an interval later. Each AWS call
goes through :meth:`SharedPoller._call` (counted in ``calls``, transient errors retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

from airflow_hetero._retry import RetryPolicy, acall_with_retry

if TYPE_CHECKING:
    # equal for triggers whose hooks reach the same service the same way: they share a poller
    from airflow_hetero.task_arguments import AwsSettingsKey

#: What a trigger receives: an answer, or the exception asking raised.
Update = dict[str, Any] | BaseException


class Subscriber(Protocol):
    """One trigger's view of one job: how often it wants news, and where the news arrive."""

    @property
    def interval(self) -> float: ...

    @property
    def updates(self) -> asyncio.Queue[Update]: ...


SubT = TypeVar("SubT", bound=Subscriber)


@dataclass(eq=False, kw_only=True)
class WatchedJob(Generic[SubT]):
    """A watched job: its triggers' subscriptions and when it was last checked (loop time)."""

    subscribers: list[SubT] = field(default_factory=list)
    checked_at: float = float("-inf")

    @property
    def interval(self) -> float:
        """The shortest interval any of its triggers asked for."""
        return min(s.interval for s in self.subscribers)

    def is_due(self, now: float) -> bool:
        return now >= self.checked_at + self.interval - 1e-3

    def deliver(self, item: Update) -> None:
        """Give ``item`` to every trigger watching the job."""
        for sub in self.subscribers:
            sub.updates.put_nowait(item)


JobT = TypeVar("JobT", bound=WatchedJob[Any])


class SharedPoller(Generic[JobT]):
    """Polls every watched job of one connection for one event loop; a subclass says how (``_poll``)."""

    #: set per subclass by ``__init_subclass__``: its module's logger, its name in log lines and task
    #: names, the AWS calls it counts, and its own registry (loop -> settings -> poller)
    log: ClassVar[logging.Logger] = logging.getLogger(__name__)
    what: ClassVar[str] = "Watcher"
    task_prefix: ClassVar[str] = "hetero-poller"
    call_names: ClassVar[tuple[str, ...]] = ()
    registry: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[AwsSettingsKey, SharedPoller[Any]]]]

    def __init_subclass__(cls, *, what: str, task_prefix: str, calls: tuple[str, ...], **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.log = logging.getLogger(cls.__module__)
        cls.what, cls.task_prefix, cls.call_names = what, task_prefix, calls
        cls.registry = weakref.WeakKeyDictionary()

    def __init__(self, key: AwsSettingsKey, make_hook: Callable[[], Any], retry_policy: RetryPolicy) -> None:
        self.key = key
        self._make_hook = make_hook
        self._retry = retry_policy
        self._jobs: dict[str, JobT] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.calls: dict[str, int] = dict.fromkeys(self.call_names, 0)  # AWS calls made, by name

    @classmethod
    def shared(cls, key: AwsSettingsKey, make_hook: Callable[[], Any], retry_policy: RetryPolicy) -> Self:
        """The poller of the running event loop for ``key`` (created on first use)."""
        pollers = cls.registry.setdefault(asyncio.get_running_loop(), {})
        poller = pollers.get(key)
        if not isinstance(poller, cls):  # (each subclass has its own registry: it holds no other kind)
            poller = pollers[key] = cls(key, make_hook, retry_policy)
        return poller

    @contextlib.asynccontextmanager
    async def _watching(self, job_key: str, new_job: Callable[[], JobT], sub: SubT) -> AsyncIterator[SubT]:
        """Watch job ``job_key`` (``new_job()`` when no trigger watches it yet) for ``sub`` until the block is left."""
        job = self._jobs.setdefault(job_key, new_job())
        job.subscribers.append(sub)
        job.checked_at = float("-inf")  # a new subscriber gets a fresh answer at once
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.task_prefix}-{id(self)}")
        try:
            yield sub
        finally:
            job.subscribers.remove(sub)
            if not job.subscribers:
                self._jobs.pop(job_key, None)
            self._wake.set()

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
                    self.log.warning("%s for connection %s: %s", self.what, self.key[0], exc)
                    for job in list(self._jobs.values()):
                        job.checked_at = loop.time()
                        job.deliver(exc)
                    await self._sleep(loop)
        finally:
            pollers = self.registry.get(loop)
            if pollers is not None and pollers.get(self.key) is self and not self._jobs:
                del pollers[self.key]

    async def _sleep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Until the next job is due, or a subscription comes or goes."""
        if not self._jobs:
            return
        delay = min(job.checked_at + job.interval for job in self._jobs.values()) - loop.time()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    async def _call(
        self, method: Callable[..., Any], name: str, about: str = "", policy: RetryPolicy | None = None, **kwargs: Any
    ) -> Any:
        """One AWS call (``name`` its operation, ``about`` what it is asked of), counted, transient errors retried."""
        self.calls[name] += 1
        what = f"{name} {about}" if about else name
        return await acall_with_retry(method, policy=policy or self._retry, what=what, **kwargs)

    async def _poll(self, client: Any, now: float) -> None:
        """Check the due jobs (loop time ``now``) and deliver what is new."""
        raise NotImplementedError
