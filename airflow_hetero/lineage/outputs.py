"""What the operator and the sensor share about a finished job: its model asset event and its lineage.

Functions of the task they are given (a :class:`RecordsOutputs`), called from the task's own short methods:
:func:`declare_model_asset` in ``__init__`` (only when a model asset is given), :func:`recorded` around
``execute`` and each resume (:func:`record_job_outputs` when it returns; a job that failed is kept too),
:func:`lineage_on_complete` and :func:`lineage_on_failure` for the OpenLineage listener. Functions and not a
mixin, so that a DAG parse loads none of this (tests/package/test_parse_path.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_hetero._compat import Asset, Context
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.pricing.billing import BilledCost
    from airflow_hetero.pricing.settings import PriceSettings

__all__ = [
    "RecordsOutputs",
    "declare_model_asset",
    "lineage_on_complete",
    "lineage_on_failure",
    "record_job_outputs",
    "recorded",
    "run_cost",
]

log = logging.getLogger(__name__)


class RecordsOutputs(Protocol):
    """What these functions read and write of a task (the training operator, the sensor)."""

    task_id: str
    outlets: Any
    #: The model asset the task updates (None: it declares none).
    model_asset: Asset | None
    #: The result dict of the job this task saw finish, or fail (None before, or when it did not wait).
    job_result: dict[str, Any] | None
    #: What that job cost (:func:`run_cost`), once asked.
    job_cost: BilledCost | None

    @property
    def price_settings(self) -> PriceSettings:
        """What prices the run's cost in the asset's extra."""

    def make_hook(self) -> HeteroTrainingHook:
        """A SageMaker hook for the task's AWS settings."""


def declare_model_asset(task: RecordsOutputs, model_asset: Asset | str) -> Asset:
    """Add the model asset (an Asset, or its URI) to the task's outlets; return it."""
    from airflow_hetero._compat import Asset

    asset = Asset(model_asset) if isinstance(model_asset, str) else model_asset
    task.outlets = [*(task.outlets or []), asset]
    return asset


def recorded(task: RecordsOutputs, context: Context, outcome: Callable[[], Any]) -> Any:
    """``outcome()`` (``execute`` or a resume), its result recorded (:func:`record_job_outputs`); a job that ended
    in the task's error is kept too, for the lineage on failure."""
    from airflow_hetero.job.outcome import TrainingJobError, result_dict

    try:
        result = outcome()
    except TrainingJobError as err:
        if err.describe is not None:
            task.job_result, task.job_cost = result_dict(err.describe), None
        raise
    record_job_outputs(task, context, result)
    return result


def record_job_outputs(task: RecordsOutputs, context: Context, result: Any) -> None:
    """Keep the result; give the model asset's event the job's name, artifact, groups, metrics and cost."""
    if not isinstance(result, dict):
        return
    task.job_result, task.job_cost = result, None
    if task.model_asset is None:
        return
    from airflow_hetero._compat import AirflowFailException
    from airflow_hetero.lineage.assets import artifact_outside_asset, model_asset_extra

    if result.get("status") != "Completed":
        raise AirflowFailException(
            f"Task {task.task_id}: job {result.get('training_job_name')} ended {result.get('status')}, "
            f"so there is no model for asset {task.model_asset.uri}"
        )
    problem = artifact_outside_asset(task.model_asset.uri, result)
    if problem:
        raise AirflowFailException(f"Task {task.task_id}: {problem}; set model_asset to the job's output_path")
    context["outlet_events"][task.model_asset].extra = model_asset_extra(result, run_cost(task, result))


def run_cost(task: RecordsOutputs, result: dict[str, Any]) -> BilledCost:
    """What the run cost (:func:`airflow_hetero.pricing.billing.billed_cost`), its groups priced through the
    task's hook like the summary operator's; a lookup that fails makes the total unknown, not the task. Asked
    once per job seen (the asset event and the lineage share it)."""
    if task.job_cost is None or task.job_result is not result:
        task.job_cost = _priced(task, result)
    return task.job_cost


def _priced(task: RecordsOutputs, result: dict[str, Any]) -> BilledCost:
    from airflow_hetero.pricing.billing import billed_cost
    from airflow_hetero.pricing.price_list import unknown

    groups = list(result.get("instance_groups") or [])
    types = sorted({str(g["type"]) for g in groups if g.get("type")})
    settings = task.price_settings
    try:
        prices = task.make_hook().training_prices(types, settings)
    except Exception as exc:  # the job is done and its model is good: a price must not fail the task
        log.warning("No prices for the model asset's cost of %s: %s", result.get("training_job_name"), exc)
        why = f"the price lookup failed ({type(exc).__name__}: {exc})"
        prices = {t: unknown(t, settings.currency, why) for t in types}
    return billed_cost(groups, result.get("billable_seconds"), prices, currency=settings.currency)


def lineage_on_complete(task: RecordsOutputs, task_instance: Any) -> OperatorLineage[Any, Any] | None:
    """Inputs: every S3 channel with its instance groups; output: the model artifact; the facets naming the job
    (its ARN, engine, type, identity tags, instance groups and cost). None: no job seen."""
    return _lineage(task, task_instance, failed=False)


def lineage_on_failure(task: RecordsOutputs, task_instance: Any) -> OperatorLineage[Any, Any] | None:
    """As :func:`lineage_on_complete` for a job that failed (no model output); None when no job was seen."""
    return _lineage(task, task_instance, failed=True)


def _lineage(task: RecordsOutputs, task_instance: Any, *, failed: bool) -> OperatorLineage[Any, Any] | None:
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.lineage.openlineage import training_lineage

    result = task.job_result
    if result is None:
        return None
    tags = TaskIdentity.of(task_instance).tags()
    return training_lineage(result, identity_tags=tags, cost=run_cost(task, result), failed=failed)
