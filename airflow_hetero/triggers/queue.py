"""Queue mode's triggers: wait in an AWS Batch job queue, then for the running attempt's training job.

:class:`HeteroServiceJobTrigger` waits for a service job (from the loop's shared
:class:`~airflow_hetero.triggers.queue_watcher.QueueWatcher`: one listing per queue per interval), logs each state
as it changes (RUNNABLE with its reason and place in the queue) and fires when an attempt other than
``after_attempt`` has a training job (``status`` "attempt", ``training_job``), or when the service job ends
("done"). The operator then defers to :class:`HeteroQueuedTrainingTrigger`, the training-job trigger whose kill
terminates the service job (which stops its training job) instead of stopping the training job alone, as Batch
would start another attempt. Ending the task terminates the service job (Airflow 3.3+ ``on_kill``; on 2.11,
:meth:`cleanup` as the training-job trigger does). Class paths and serialized kwargs are a stable interface.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_hetero._retry import RetryPolicy, acall_with_retry, error_code, is_transient
from airflow_hetero.task_arguments import DEFAULT_AWS_CONN_ID, AwsSettings
from airflow_hetero.triggers.training import (
    CLEANUP_TIMED_OUT,
    CLEANUP_TIMEOUT,
    HAS_TRIGGER_ON_KILL,
    HeteroTrainingTrigger,
)

SERVICE_JOB_CLASS_PATH = "airflow_hetero.triggers.queue.HeteroServiceJobTrigger"
QUEUED_TRAINING_CLASS_PATH = "airflow_hetero.triggers.queue.HeteroQueuedTrainingTrigger"
#: Why the triggerer terminates a service job whose task was killed, cleared or marked.
KILLED_REASON = "The Airflow task was killed, cleared or marked"


async def terminate_service_job(
    trigger: HeteroServiceJobTrigger | HeteroQueuedTrainingTrigger, job_id: str, retry: RetryPolicy
) -> None:
    """TerminateServiceJob through an async Batch client of ``trigger``'s AWS settings (its
    :meth:`~airflow_hetero.hooks.aws_settings.AwsSettings.make_batch_hook`)."""
    hook = await asyncio.to_thread(trigger.make_batch_hook)
    async with await hook.async_client() as client:
        try:
            await acall_with_retry(
                client.terminate_service_job,
                policy=retry,
                what=f"TerminateServiceJob {job_id}",
                jobId=job_id,
                reason=KILLED_REASON,
            )
        except Exception as exc:
            if error_code(exc) != "ClientException":
                raise
            trigger.log.info("Service job %s not terminated: %s", job_id, exc)
            return
    trigger.log.info("Asked service job %s to terminate (task killed): it stops its training job", job_id)


class HeteroServiceJobTrigger(AwsSettings, BaseTrigger):
    """Fire when service job ``job_id`` has a new attempt's training job, or ends.

    :param job_id: the service job's id; ``job_name`` and ``job_queue`` (name or ARN) as submitted.
    :param after_attempt: the training job of an attempt already followed: wait for another, or the end.
    :param poll_interval: seconds between checks (one listing per queue for every job of the triggerer).
    :param stop_on_kill: terminate the service job when the task is killed, cleared or marked.

    Event payload: ``status`` ("attempt", "done", "blocked": RUNNABLE for ever with ``MISCONFIGURATION:...``,
    or "error"), ``service_job_id``, ``job_status``,
    ``status_reason``, ``training_job`` (the latest attempt's), for errors ``message``.
    """

    def __init__(
        self,
        job_id: str,
        *,
        job_name: str,
        job_queue: str,
        after_attempt: str | None = None,
        aws_conn_id: str | None = DEFAULT_AWS_CONN_ID,
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        poll_interval: float = 30,
        stop_on_kill: bool = False,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.job_id = job_id
        self.job_name = job_name
        self.job_queue = job_queue
        self.after_attempt = after_attempt
        self.set_aws_settings(aws_conn_id, region_name, verify, botocore_config)
        self.poll_interval = float(poll_interval)
        self.stop_on_kill = stop_on_kill
        self.fired = False
        step = min(30.0, self.poll_interval)
        self.retry_policy = RetryPolicy(base_delay=min(1.0, step), max_delay=step)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Stable class path and plain kwargs."""
        return SERVICE_JOB_CLASS_PATH, {
            "job_id": self.job_id,
            "job_name": self.job_name,
            "job_queue": self.job_queue,
            "after_attempt": self.after_attempt,
            **self.aws_settings(),
            "poll_interval": self.poll_interval,
            "stop_on_kill": self.stop_on_kill,
        }

    def _event(self, status: str, answer: dict[str, Any] | None, message: str | None = None) -> TriggerEvent:
        from airflow_hetero.job.service_job import latest_training_job

        answer = answer or {}
        payload: dict[str, Any] = {
            "status": status,
            "stage": "queue",
            "service_job_id": self.job_id,
            "job_status": answer.get("status"),
            "status_reason": answer.get("statusReason"),
            "training_job": latest_training_job(answer),
        }
        if message is not None:
            payload["message"] = message
        self.fired = True
        return TriggerEvent(payload)  # type: ignore[no-untyped-call]

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Log each new state; fire on a new attempt's training job or the end."""
        from airflow_hetero.triggers.queue_watcher import QueueWatcher

        watcher = QueueWatcher.shared(self.aws_settings_key(), self.make_batch_hook, self.retry_policy)
        async with watcher.subscribe(self.job_id, self.job_queue, self.poll_interval) as subscription:
            event = await self._wait(subscription.updates)
        yield event

    async def _wait(self, updates: asyncio.Queue[dict[str, Any] | BaseException]) -> TriggerEvent:
        from airflow_hetero.job.service_job import blocked_reason, is_final, latest_training_job, state_line

        said: tuple[Any, ...] | None = None
        while True:
            answer = await updates.get()
            if isinstance(answer, BaseException):
                if not is_transient(answer):
                    self.log.error("Stopped watching service job %s: %s", self.job_name, answer)
                    return self._event("error", None, f"{type(answer).__name__}: {answer}")
                self.log.warning("Service job %s: still failing transiently: %s", self.job_name, answer)
                continue
            now = (answer.get("status"), answer.get("statusReason"), answer.get("place"), latest_training_job(answer))
            if now != said:
                self.log.info("Service job %s: %s", self.job_name, state_line(answer, answer.get("place")))
                said = now
            latest = latest_training_job(answer)
            if blocked_reason(answer) is not None:
                return self._event("blocked", answer)
            if is_final(answer):
                return self._event("done", answer)
            # SageMaker's job names do not depend on case: an ARN spells the name lower-case, the task SageMaker's way
            new = latest and latest.lower() != (self.after_attempt or "").lower()
            if new and answer.get("status") not in ("SUBMITTED", "RUNNABLE"):
                return self._event("attempt", answer)

    async def on_kill(self) -> None:
        """The task was killed, cleared or marked: terminate the service job this trigger owns."""
        if self.stop_on_kill:
            await terminate_service_job(self, self.job_id, self.retry_policy)

    async def cleanup(self) -> None:
        """Airflow 2.11 (no trigger ``on_kill``): terminate the service job when the task left deferral."""
        if HAS_TRIGGER_ON_KILL or not self.stop_on_kill or self.fired:
            return
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT) as bound:
                try:
                    left = await asyncio.to_thread(HeteroTrainingTrigger.task_left_deferral, self)  # type: ignore[arg-type]
                except Exception as exc:
                    self.log.warning("Could not read the state of the task of %s: %s", self.job_name, exc)
                    return
                if left:
                    await self.on_kill()
        except TimeoutError:
            if not bound.expired():  # a timeout of the stop request's own: an error like any other
                raise
            self.log.warning(CLEANUP_TIMED_OUT, "service job", self.job_name, CLEANUP_TIMEOUT)


class HeteroQueuedTrainingTrigger(HeteroTrainingTrigger):
    """The training-job trigger for an attempt of service job ``service_job_id``: a kill terminates the service
    job (which stops the training job), so Batch starts no further attempt."""

    def __init__(self, job_name: str, *, service_job_id: str, **kwargs: Any) -> None:
        super().__init__(job_name, **kwargs)
        self.service_job_id = service_job_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The training-job trigger's kwargs and the service job's id."""
        _, kwargs = super().serialize()
        return QUEUED_TRAINING_CLASS_PATH, {**kwargs, "service_job_id": self.service_job_id}

    def _event(self, status: str, describe: dict[str, Any] | None, message: str | None = None) -> TriggerEvent:
        """The training-job trigger's event, saying which service job it belongs to (``dag.test()`` resumes
        without the deferral's kwargs)."""
        event = super()._event(status, describe, message)
        event.payload.update(stage="training", service_job_id=self.service_job_id)
        return event

    async def on_kill(self) -> None:
        """Terminate the service job (not only its training job)."""
        if self.stop_on_kill:
            await terminate_service_job(self, self.service_job_id, self.retry_policy)
