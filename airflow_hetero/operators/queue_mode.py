"""Queue mode's check at DAG parse (``batch_queue=``): the argument, and what Batch or the queue would refuse.

The run itself is :class:`~airflow_hetero.operators.queue_steps.QueueRun`, imported when the task runs
(docs/queue.md). This module is imported only by a task that has a queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero.job.batch_queue import BatchQueue


def _definition_fallbacks(source: Any) -> bool:
    """True when a definition dict's instance groups list fallback types (a file or template: not known yet)."""
    if not isinstance(source, Mapping):
        return False
    groups = source.get("instance_groups")
    return isinstance(groups, list) and any(isinstance(g, Mapping) and g.get("fallback_instance_types") for g in groups)


def check_batch_queue(batch_queue: Any, fallbacks: Any, job: Any, job_name: str | None) -> BatchQueue:
    """``batch_queue`` as a :class:`~airflow_hetero.job.batch_queue.BatchQueue`; ValueError when Batch or the
    queue would refuse the task (fallback types, a job name too long for Batch's names)."""
    from airflow_hetero.definition.naming import explicit_job_names
    from airflow_hetero.job.batch_queue import FALLBACKS_WITH_QUEUE, BatchQueue
    from airflow_hetero.sagemaker_facts import BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH

    queue = BatchQueue.of(batch_queue)
    if fallbacks or _definition_fallbacks(job):
        raise ValueError(FALLBACKS_WITH_QUEUE)
    if job_name and "{{" not in job_name and "{%" not in job_name:
        try:
            explicit_job_names(job_name, BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH)
        except ValueError as err:
            raise ValueError(f"job_name: {err}") from None
    return queue
