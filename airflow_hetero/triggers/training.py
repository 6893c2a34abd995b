"""HeteroTrainingTrigger: wait for a training job in the triggerer, without a hidden time cap.

Status comes from the event loop's shared :class:`~airflow_hetero.triggers.watcher.JobWatcher`
(one async client per connection, batched ListTrainingJobs checks, DescribeTrainingJob on a
change), so one triggerer holds a thousand deferred jobs. Transient errors are retried and, if a
poll still fails, the next poll tries again: they never end the wait on their own. "Not found"
within ``not_found_grace_seconds`` of our own create is eventual consistency, not an error.
The wait ends when the job finishes, when the deadline passes, or on a permanent error; each ends
with one event. The default deadline is the job's own CreationTime + MaxRuntime (+ MaxWait for
spot) + a margin, and, while no Describe has succeeded, ``started_at`` (the task's start) + the
default limits: a wait is never unbounded, and a triggerer restart does not extend it.

Ending the task stops the job when the trigger owns it (``stop_on_kill``): Airflow 3.3+ calls
:meth:`on_kill` on mark failed / mark success / clear. Airflow 2.11 has no trigger ``on_kill``:
there :meth:`cleanup` asks the metadata database whether the task instance is still deferred on
this trigger, and stops the job when it is not (the trigger did not fire, so a user or a timeout
ended the task). A triggerer restart leaves the task deferred, so the job keeps running.

The class path ``airflow_hetero.triggers.HeteroTrainingTrigger`` and the kwargs of
``serialize()`` are a stable interface: a triggerer may load a trigger serialized by an older
release, so new kwargs must have defaults and old ones must keep working.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_hetero._retry import RetryPolicy, acall_with_retry, error_code, is_transient
from airflow_hetero.job.outcome import classify
from airflow_hetero.job.waiting import NOT_FOUND_YET, not_found_yet, wait_limit_seconds
from airflow_hetero.task_arguments import DEFAULT_AWS_CONN_ID, AwsSettings

CLASS_PATH = "airflow_hetero.triggers.HeteroTrainingTrigger"
#: Seconds a trigger whose deadline has already passed waits for the first check of its job, so its
#: timeout event says the job's state (an error reply ends the wait at once).
FIRST_CHECK_WAIT = 30.0
#: Airflow 3.3+ calls ``BaseTrigger.on_kill`` on user actions; older releases do not have it.
HAS_TRIGGER_ON_KILL = hasattr(BaseTrigger, "on_kill")
#: Seconds :meth:`HeteroTrainingTrigger.cleanup` (Airflow 2.11, which bounds no clean-up) may take to read
#: the task's state and ask for the stop; Airflow 3.3+ bounds ``on_kill`` itself ([triggerer] on_kill_timeout, 30).
CLEANUP_TIMEOUT = 30.0
CLEANUP_TIMED_OUT = "Clean-up of %s %s did not end within %.1f s (task state or stop unanswered): it may still run"


def _epoch(value: Any) -> float | None:
    """A DescribeTrainingJob timestamp (datetime from botocore) as epoch seconds."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return None


class HeteroTrainingTrigger(AwsSettings, BaseTrigger):
    """Fire once the training job ``job_name`` is Completed, Failed or Stopped.

    :param job_name: the SageMaker training job to watch.
    :param aws_conn_id, region_name, verify, botocore_config: the AWS connection and client settings, as
        on the operator (:mod:`airflow_hetero.task_arguments`); serialized under these names.
    :param poll_interval: seconds between DescribeTrainingJob calls.
    :param deadline: epoch seconds after which the trigger gives up with a ``timeout`` event;
        None derives it from the job (CreationTime + MaxRuntime [+ MaxWait] + margin).
    :param stop_on_kill: stop the job when a user kills the deferred task (mark failed/success,
        clear); the operator sets it for jobs it owns, the sensor does not.
    :param started_at: epoch seconds the task started (default: now); bounds the wait while no
        Describe succeeds.
    :param created_at: epoch seconds of our own CreateTrainingJob, for the not-found grace.
    :param deadline_reason: which limit ``deadline`` stands for, repeated in the timeout event.
    :param not_found_grace_seconds: how long after ``created_at`` "not found" means "not visible yet"
        (None: :data:`airflow_hetero.job.waiting.NOT_FOUND_GRACE_SECONDS`; the operator passes its own).

    Event payload: ``status`` ("done", "timeout" or "error"), ``job_name``, ``job_status``,
    ``secondary_status``, ``failure_reason``, for timeouts ``deadline_reason`` and, for timeouts
    and errors, ``message``.
    """

    def __init__(
        self,
        job_name: str,
        *,
        aws_conn_id: str | None = DEFAULT_AWS_CONN_ID,
        region_name: str | None = None,
        poll_interval: float = 30,
        deadline: float | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        stop_on_kill: bool = False,
        started_at: float | None = None,
        created_at: float | None = None,
        deadline_reason: str | None = None,
        not_found_grace_seconds: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.job_name = job_name
        self.set_aws_settings(aws_conn_id, region_name, verify, botocore_config)
        self.poll_interval = poll_interval
        self.deadline = deadline
        self.stop_on_kill = stop_on_kill
        self.started_at = time.time() if started_at is None else float(started_at)
        self.created_at = created_at
        self.deadline_reason = deadline_reason
        self.not_found_grace_seconds = None if not_found_grace_seconds is None else float(not_found_grace_seconds)
        self.fired = False  # an event was yielded: the task resumes, the job is not ours to stop
        # Back off no longer than one poll interval (at most 30 s) between retries of a poll.
        step = min(30.0, float(poll_interval))
        self.retry_policy = RetryPolicy(base_delay=min(1.0, step), max_delay=step)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Stable class path and plain (JSON-able) kwargs.

        ``not_found_grace_seconds`` (the newest kwarg) is written only when set, so a triggerer still
        running the previous release loads what a newer worker wrote.
        """
        kwargs: dict[str, Any] = {
            "job_name": self.job_name,
            **self.aws_settings(),
            "poll_interval": self.poll_interval,
            "deadline": self.deadline,
            "stop_on_kill": self.stop_on_kill,
            "started_at": self.started_at,
            "created_at": self.created_at,
            "deadline_reason": self.deadline_reason,
        }
        if self.not_found_grace_seconds is not None:
            kwargs["not_found_grace_seconds"] = self.not_found_grace_seconds
        return CLASS_PATH, kwargs

    def _event(self, status: str, describe: dict[str, Any] | None, message: str | None = None) -> TriggerEvent:
        describe = describe or {}
        payload: dict[str, Any] = {
            "status": status,
            "job_name": self.job_name,
            "job_status": describe.get("TrainingJobStatus"),
            "secondary_status": describe.get("SecondaryStatus"),
            "failure_reason": describe.get("FailureReason"),
        }
        if message is not None:
            payload["message"] = message
        if status == "timeout":
            payload["deadline_reason"] = self.deadline_reason
        self.fired = True
        return TriggerEvent(payload)  # type: ignore[no-untyped-call]

    def _deadline_for(self, describe: dict[str, Any] | None) -> float:
        """The explicit deadline; else the job's CreationTime + limits; else the task's start + default limits."""
        if self.deadline is not None:
            return float(self.deadline)
        created = _epoch((describe or {}).get("CreationTime"))
        if created is None or describe is None:
            return self.started_at + wait_limit_seconds(describe or {})
        return created + wait_limit_seconds(describe)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Wait until the job finishes, the deadline passes or a permanent error occurs.

        Status comes from the loop's shared :class:`~airflow_hetero.triggers.watcher.JobWatcher`:
        one client and batched checks for every trigger of the same connection.
        """
        from airflow_hetero.triggers.watcher import JobWatcher

        watcher = JobWatcher.shared(self.aws_settings_key(), self.make_hook, self.retry_policy)
        async with watcher.subscribe(self.job_name, self.poll_interval) as subscription:
            event = await self._wait(subscription.updates)
        yield event

    async def _wait(self, updates: asyncio.Queue[dict[str, Any] | BaseException]) -> TriggerEvent:
        """The one event that ends the wait, from the watcher's answers on ``updates``.

        One timer covers the whole wait (moved once the job's own deadline is known): a thousand
        waiting triggers hold a thousand timers, not a new one per answer.
        """
        loop = asyncio.get_running_loop()

        def loop_time(epoch: float) -> float:
            return loop.time() + (epoch - time.time())

        deadline = self._deadline_for(None)  # until a Describe succeeds: counted from the task's start
        known = self.deadline is not None
        # a deadline that has already passed still waits for the first check's outcome (a loaded
        # triggerer may take seconds to make its client), so the timeout event carries the job's state
        first_reply_by = time.time() + FIRST_CHECK_WAIT
        last: dict[str, Any] | None = None
        replied = False
        try:
            async with asyncio.timeout_at(loop_time(max(deadline, first_reply_by))) as timer:
                while True:
                    answer = await updates.get()
                    if not replied and isinstance(answer, BaseException):
                        timer.reschedule(loop_time(deadline))  # the service cannot say: no reason to wait on
                    replied = True
                    if isinstance(answer, BaseException):
                        if not_found_yet(answer, self.created_at, self.not_found_grace_seconds):
                            self.log.warning(NOT_FOUND_YET, self.job_name)
                        elif not is_transient(answer):
                            self.log.error("Stopped watching training job %s: %s", self.job_name, answer)
                            return self._event("error", last, f"{type(answer).__name__}: {answer}")
                        else:
                            self.log.warning("Training job %s: still failing transiently: %s", self.job_name, answer)
                        continue
                    if last is None:
                        if not known:
                            deadline, known = self._deadline_for(answer), True
                        timer.reschedule(loop_time(deadline))
                    last = answer
                    try:
                        finished = classify(answer) != "running"
                    except ValueError as exc:
                        return self._event("error", answer, str(exc))
                    if finished:
                        return self._event("done", answer)
                    self.log.info(
                        "Training job %s: %s / %s",
                        self.job_name,
                        answer.get("TrainingJobStatus"),
                        answer.get("SecondaryStatus"),
                    )
        except TimeoutError:
            return self._event("timeout", last, f"deadline {deadline:.0f} passed")

    async def on_kill(self) -> None:
        """A user killed the deferred task: stop the job when this trigger owns it."""
        if not self.stop_on_kill:
            return
        hook = await asyncio.to_thread(self.make_hook)
        async with await hook.async_client() as client:
            try:
                await acall_with_retry(
                    client.stop_training_job,
                    policy=self.retry_policy,
                    what=f"StopTrainingJob {self.job_name}",
                    TrainingJobName=self.job_name,
                )
            except Exception as exc:
                if error_code(exc) != "ValidationException":
                    raise
                self.log.info("Training job %s not stopped: %s", self.job_name, exc)
                return
        self.log.info("Requested stop of training job %s (task killed)", self.job_name)

    async def cleanup(self) -> None:
        """Airflow 2.11 only (no trigger ``on_kill`` there): stop the job when the task left deferral.

        Runs on every exit of the trigger. It stops the job only when this trigger owns it, did not
        fire, and the task instance is no longer deferred (marked failed/success, cleared, timed
        out); on a triggerer restart the task is still deferred and the job keeps running. Bounded:
        ``CLEANUP_TIMEOUT`` seconds in all (the triggerer's shutdown waits for it), then a warning.
        """
        if HAS_TRIGGER_ON_KILL or not self.stop_on_kill or self.fired:
            return
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT) as bound:
                try:
                    left = await asyncio.to_thread(self.task_left_deferral)
                except Exception as exc:
                    self.log.warning("Could not read the state of the task of %s: %s", self.job_name, exc)
                    return
                if left:
                    self.log.info("The task of training job %s is no longer deferred: stopping the job", self.job_name)
                    await self.on_kill()
        except TimeoutError:
            if not bound.expired():  # a timeout of the stop request's own: an error like any other
                raise
            self.log.warning(CLEANUP_TIMED_OUT, "training job", self.job_name, CLEANUP_TIMEOUT)

    def task_left_deferral(self) -> bool:
        """True when this trigger's task instance is no longer deferred (Airflow 2.11's metadata DB)."""
        ti = getattr(self, "task_instance", None)
        if ti is None:
            return False
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session

        with create_session() as session:
            state = (
                session.query(TaskInstance.state)
                .filter_by(dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id, map_index=ti.map_index)
                .scalar()
            )
        return str(getattr(state, "value", state)) != "deferred"
