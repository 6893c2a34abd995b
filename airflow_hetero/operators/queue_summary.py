"""The summary operator's side of queue mode: the service job its training task ran in, and the attempts
before the summarised one, priced (docs/queue.md). Never fails the summary: a service job that cannot be
read is a warning in the task log and a summary without ``queue_attempts``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.hooks.batch import HeteroBatchHook
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.logs.shape import QueueAttempt
    from airflow_hetero.pricing.settings import PriceSettings

__all__ = ["queue_input"]


class SummaryTask(Protocol):
    """What of the summary operator this reads (its training task, AWS and price settings, its log)."""

    training_task_id: str | None

    @property
    def price_settings(self) -> PriceSettings: ...

    @property
    def log(self) -> Any: ...

    def make_batch_hook(self) -> HeteroBatchHook: ...


def queue_input(
    op: SummaryTask, context: Context, hook: HeteroTrainingHook, job_name: str
) -> tuple[dict[str, Any], list[QueueAttempt]] | None:
    """When ``op.training_task_id`` pushed a ``service_job`` XCom (queue mode): its DescribeServiceJob answer
    and its attempts before ``job_name``, each described and priced with ``op``'s price settings; else None."""
    from airflow_hetero.xcom_keys import SERVICE_JOB_XCOM_KEY

    pushed = context["ti"].xcom_pull(task_ids=op.training_task_id, key=SERVICE_JOB_XCOM_KEY)
    if not isinstance(pushed, Mapping) or not pushed.get("job_id"):
        return None
    from airflow_hetero.job.service_job import attempt_training_jobs
    from airflow_hetero.logs.queue_attempts import earlier_attempts

    job_id = str(pushed["job_id"])
    try:
        batch = op.make_batch_hook()
        service = batch.describe_service_job(job_id)
        service.pop("ResponseMetadata", None)
        earlier = earlier_attempts(
            attempt_training_jobs(service),
            job_name,
            describe_training_job=hook.describe_training_job,
            prices=lambda types: hook.training_prices(types, op.price_settings),
            currency=op.price_settings.currency,
        )
    except Exception as exc:  # the summary of the latest attempt stands without it
        op.log.warning("Queue: could not read service job %s (%s): the summary leaves out queue_attempts", job_id, exc)
        return None
    return service, earlier
