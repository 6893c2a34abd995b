"""Queue mode of the training operator (``batch_queue=``): the job goes through an AWS Batch job queue as one
service job, as a mixin of :class:`~airflow_hetero.operators.training.HeteroTrainingOperator` (docs/queue.md).

This module holds what the operator's class needs at DAG parse: the argument's checks and the entry points the
operator calls (execute, resume after deferral, kill). The steps live in
:mod:`airflow_hetero.operators.queue_steps`, imported when the task runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.lineage.mixin import records_outputs

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.hooks.batch import HeteroBatchHook
    from airflow_hetero.job.batch_queue import BatchQueue


def _definition_fallbacks(source: Any) -> bool:
    """True when a definition dict's instance groups list fallback types (a file or template: not known yet)."""
    if not isinstance(source, Mapping):
        return False
    groups = source.get("instance_groups")
    return isinstance(groups, list) and any(isinstance(g, Mapping) and g.get("fallback_instance_types") for g in groups)


class QueueModeMixin:
    """``batch_queue``: checked at parse, and the operator's queue-mode entry points."""

    record_job_outputs: Any  # JobOutputsMixin's (records_outputs calls it)
    make_batch_hook: Callable[[], HeteroBatchHook]  # AwsSettings's

    task_id: str
    log: Any
    job_name: str | None
    batch_queue: BatchQueue | None
    service_job_id: str | None

    def set_batch_queue(self, batch_queue: Any, fallbacks: Any, job: Any) -> None:
        """Check and keep ``batch_queue`` (None: direct mode); ValueError when Batch or the queue would refuse."""
        self.service_job_id = None  # the service job on_kill terminates
        if batch_queue is None:
            self.batch_queue = None
            return
        from airflow_hetero.definition.naming import explicit_job_names
        from airflow_hetero.job.batch_queue import BatchQueue
        from airflow_hetero.sagemaker_facts import BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH

        self.batch_queue = BatchQueue.of(batch_queue)
        from airflow_hetero.job.batch_queue import FALLBACKS_WITH_QUEUE

        if fallbacks or _definition_fallbacks(job):
            raise ValueError(FALLBACKS_WITH_QUEUE)
        name = self.job_name
        if name and "{{" not in name and "{%" not in name:
            try:
                explicit_job_names(name, BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH)
            except ValueError as err:
                raise ValueError(f"job_name: {err}") from None

    def execute_queued(self, context: Context) -> dict[str, Any]:
        """Submit or re-attach to this task instance's service job, then wait (or defer)."""
        from airflow_hetero.operators.queue_steps import QueueRun

        return QueueRun(self, context).run()

    @records_outputs
    def execute_queued_complete(
        self, context: Context, event: dict[str, Any], service_job_id: str | None = None, stage: str = "queue"
    ) -> dict[str, Any]:
        """Resume after a deferral of queue mode (the queue's trigger or the attempt's training-job trigger)."""
        from airflow_hetero.operators.queue_steps import QueueRun

        job_id = service_job_id or str(event.get("service_job_id"))  # dag.test() resumes without the kwargs
        return QueueRun(self, context).resume(event, job_id, str(event.get("stage") or stage))

    def terminate_queued(self, reason: str) -> bool:
        """Terminate the service job this task submitted or re-attached to (on_kill); False without one."""
        job_id = self.service_job_id
        if not job_id:
            return False
        self.make_batch_hook().terminate_service_job(job_id, reason)
        self.log.info("Task killed: asked service job %s to terminate (it stops its training job)", job_id)
        return True

    def terminate_own_service_job(self, context: Context) -> str | None:
        """Find this task instance's unfinished service job by its names and identity; terminate it."""
        from airflow_hetero.operators.queue_steps import QueueRun

        try:
            found: str | None = QueueRun(self, context).terminate_own("The Airflow task ended")
            return found
        except AirflowFailException:
            return None
