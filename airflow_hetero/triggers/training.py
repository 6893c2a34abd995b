"""HeteroTrainingTrigger: wait for a training job in the triggerer, without a hidden time cap.

Status comes from the event loop's shared :class:`~airflow_hetero.triggers.watcher.JobWatcher`
(one async client per connection, batched ListTrainingJobs checks, DescribeTrainingJob on a
change), so one triggerer holds a thousand deferred jobs. Transient errors are retried and, if a
poll still fails, the next poll tries again: they never end the wait on their own. The wait ends
when the job finishes, when the deadline passes, or on a permanent error; each ends with one
event. The default deadline is the job's own CreationTime + MaxRuntime (+ MaxWait for spot) + a
margin, so a triggerer restart does not extend it.

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
from airflow_hetero.hooks.outcome import classify, wait_limit_seconds

CLASS_PATH = "airflow_hetero.triggers.HeteroTrainingTrigger"


def _epoch(value: Any) -> float | None:
    """A DescribeTrainingJob timestamp (datetime from botocore) as epoch seconds."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return None


class HeteroTrainingTrigger(BaseTrigger):
    """Fire once the training job ``job_name`` is Completed, Failed or Stopped.

    :param job_name: the SageMaker training job to watch.
    :param aws_conn_id: Airflow AWS connection (its ``endpoint_url`` extra is honoured).
    :param region_name: overrides the connection's region.
    :param poll_interval: seconds between DescribeTrainingJob calls.
    :param deadline: epoch seconds after which the trigger gives up with a ``timeout`` event;
        None derives it from the job (CreationTime + MaxRuntime [+ MaxWait] + margin).
    :param verify: passed to the AWS hook (TLS verification).
    :param botocore_config: dict of ``botocore.config.Config`` options.
    :param stop_on_kill: stop the job when a user kills the deferred task (mark failed/success,
        clear); the operator sets it for jobs it owns, the sensor does not.

    Event payload: ``status`` ("done", "timeout" or "error"), ``job_name``, ``job_status``,
    ``secondary_status``, ``failure_reason`` and, for errors, ``message``.
    """

    def __init__(
        self,
        job_name: str,
        *,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        poll_interval: float = 30,
        deadline: float | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        stop_on_kill: bool = False,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.job_name = job_name
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.poll_interval = poll_interval
        self.deadline = deadline
        self.verify = verify
        self.botocore_config = botocore_config
        self.stop_on_kill = stop_on_kill
        # Back off no longer than one poll interval (at most 30 s) between retries of a poll.
        step = min(30.0, float(poll_interval))
        self.retry_policy = RetryPolicy(base_delay=min(1.0, step), max_delay=step)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Stable class path and plain (JSON-able) kwargs."""
        return (
            CLASS_PATH,
            {
                "job_name": self.job_name,
                "aws_conn_id": self.aws_conn_id,
                "region_name": self.region_name,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
                "verify": self.verify,
                "botocore_config": self.botocore_config,
                "stop_on_kill": self.stop_on_kill,
            },
        )

    def _hook(self) -> Any:
        """The SageMaker hook (its async client is used); imported here, when the trigger runs."""
        from airflow_hetero.hooks.training import HeteroTrainingHook

        return HeteroTrainingHook.for_task(self)

    def _event(
        self, status: str, describe: dict[str, Any] | None, message: str | None = None
    ) -> TriggerEvent:
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
        return TriggerEvent(payload)  # type: ignore[no-untyped-call]

    def _deadline_for(self, describe: dict[str, Any]) -> float | None:
        if self.deadline is not None:
            return float(self.deadline)
        created = _epoch(describe.get("CreationTime"))
        return None if created is None else created + wait_limit_seconds(describe)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Wait until the job finishes, the deadline passes or a permanent error occurs.

        Status comes from the loop's shared :class:`~airflow_hetero.triggers.watcher.JobWatcher`:
        one client and batched checks for every trigger of the same connection.
        """
        from airflow_hetero.triggers.watcher import JobWatcher, watch_key

        key = watch_key(self.aws_conn_id, self.region_name, self.verify, self.botocore_config)
        watcher = JobWatcher.shared(key, self._hook, self.retry_policy)
        deadline = None if self.deadline is None else float(self.deadline)
        # a deadline that has already passed still gives the first check a moment, so the
        # timeout event can carry the job's state
        first_answer_by = time.time() + min(max(float(self.poll_interval), 2.0), 30.0)
        last: dict[str, Any] | None = None
        async with watcher.subscribe(self.job_name, self.poll_interval) as subscription:
            while True:
                until = None if deadline is None else (deadline if last else max(deadline, first_answer_by))
                timeout = None if until is None else max(0.0, until - time.time())
                try:
                    answer = await asyncio.wait_for(subscription.updates.get(), timeout)
                except TimeoutError:
                    yield self._event("timeout", last, f"deadline {deadline:.0f} passed")
                    return
                if isinstance(answer, BaseException):
                    if not is_transient(answer):
                        self.log.error("Stopped watching training job %s: %s", self.job_name, answer)
                        yield self._event("error", last, f"{type(answer).__name__}: {answer}")
                        return
                    self.log.warning("Training job %s: still failing transiently: %s", self.job_name, answer)
                    continue
                last = answer
                if deadline is None:
                    deadline = self._deadline_for(answer)
                try:
                    finished = classify(answer) != "running"
                except ValueError as exc:
                    yield self._event("error", answer, str(exc))
                    return
                if finished:
                    yield self._event("done", answer)
                    return
                self.log.info(
                    "Training job %s: %s / %s",
                    self.job_name,
                    answer.get("TrainingJobStatus"),
                    answer.get("SecondaryStatus"),
                )

    async def on_kill(self) -> None:
        """A user killed the deferred task: stop the job when this trigger owns it."""
        if not self.stop_on_kill:
            return
        hook = self._hook()
        async with await hook.get_async_conn() as client:
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
