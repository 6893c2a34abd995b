"""What the training operator's run reads of the operator: its settings, as Protocols mypy checks.

The pipeline's steps, the name walk, the synchronous and deferred waits and queue mode take a
:class:`~airflow_hetero.operators.run_state.TrainingRun` (what one run changes) and one of these (what it only
reads). :class:`~airflow_hetero.operators.training.HeteroTrainingOperator` is each of them; nothing here is
written back. Imported when the task runs (and by type checkers), never at DAG parse.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.hooks.batch import HeteroBatchHook
    from airflow_hetero.job.batch_queue import BatchQueue
    from airflow_hetero.pricing.settings import PriceSettings


class LoggingTask(Protocol):
    """A task with a log (a logging.Logger on Airflow 2.11, a structlog logger on Airflow 3)."""

    @property
    def task_id(self) -> str: ...

    @property
    def log(self) -> Any: ...


class WaitSettings(LoggingTask, Protocol):
    """What a wait for a training job reads: how often, how long, what to log, what counts as success."""

    @property
    def check_interval(self) -> float: ...

    @property
    def max_ingestion_time(self) -> float | None: ...

    @property
    def print_log(self) -> bool: ...

    @property
    def fail_on_stopped(self) -> bool: ...

    @property
    def transient_grace_seconds(self) -> float: ...

    @property
    def not_found_grace_seconds(self) -> float | None: ...

    @property
    def stopping_timeout_seconds(self) -> float: ...


class SubmitSettings(LoggingTask, Protocol):
    """What the pipeline and the name walk read: the job, its names, the policies' arguments."""

    @property
    def job_name(self) -> str | None: ...

    @property
    def on_existing_job(self) -> str: ...

    @property
    def durable(self) -> bool:
        """Airflow's ``ResumableJobMixin`` argument: the job is kept in the task state store (3.3+)."""

    @property
    def external_id_key(self) -> str:
        """The task state store's key of the job's reference."""

    @property
    def capacity_attempts(self) -> int | None: ...

    @property
    def capacity_retry_delay(self) -> float: ...

    @property
    def max_cost(self) -> Any: ...

    @property
    def price_settings(self) -> PriceSettings: ...

    @property
    def budget_min_runtime_seconds(self) -> int: ...

    @property
    def budget_stop_window_seconds(self) -> int | None: ...

    @property
    def rightsizing(self) -> dict[str, Any] | None: ...

    @property
    def batch_queue(self) -> BatchQueue | None: ...

    def base_dir(self) -> Path: ...

    def load_definition(self, context: Context) -> Submittable: ...

    def candidate_names(self, job: Submittable, context: Context) -> Iterator[str]: ...

    @property
    def job(self) -> Mapping[str, Any] | str | None: ...

    @property
    def request(self) -> Mapping[str, Any] | str | None: ...

    @property
    def fallback_instance_types(self) -> Any: ...

    @property
    def rightsizing_source(self) -> Mapping[str, Any] | str | None:
        """The job as written (unrendered): right-sizing's fingerprint of the definition."""

    @property
    def summary_candidates(self) -> list[str]:
        """The DAG's tasks summarising this one (``training_task_id``): right-sizing reads their records."""


class RunSettings(WaitSettings, SubmitSettings, Protocol):
    """Everything a run of the training operator reads of it, and the Airflow calls it makes."""

    @property
    def wait_for_completion(self) -> bool: ...

    @property
    def deferrable(self) -> bool: ...

    @property
    def execution_timeout(self) -> timedelta | None: ...

    def aws_settings(self) -> dict[str, Any]: ...

    def make_batch_hook(self) -> HeteroBatchHook: ...

    def defer(
        self,
        *,
        trigger: Any,
        method_name: str,
        kwargs: dict[str, Any] | None = None,
        timeout: timedelta | None = None,
    ) -> Any: ...
