"""What the operator and the sensor share about a finished job: its model asset event and its lineage.

Functions of the task they are given (a :class:`RecordsOutputs`), called from the task's own short methods:
:func:`declare_model_asset` in ``__init__`` (only when a model asset is given), :func:`record_job_outputs`
when ``execute`` or a resume returns, :func:`lineage_on_complete` for the OpenLineage listener. Functions and
not a mixin, so that a DAG parse loads none of this (tests/package/test_parse_path.py).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_hetero._compat import Asset, Context
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.pricing.billing import BilledCost
    from airflow_hetero.pricing.settings import PriceSettings

__all__ = ["RecordsOutputs", "declare_model_asset", "lineage_on_complete", "record_job_outputs", "run_cost"]

log = logging.getLogger(__name__)


class RecordsOutputs(Protocol):
    """What these functions read and write of a task (the training operator, the sensor)."""

    task_id: str
    outlets: Any
    #: The model asset the task updates (None: it declares none).
    model_asset: Asset | None
    #: The result dict of the job this task saw finish (None before, or when it did not wait).
    job_result: dict[str, Any] | None

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


def record_job_outputs(task: RecordsOutputs, context: Context, result: Any) -> None:
    """Keep the result; give the model asset's event the job's name, artifact, groups, metrics and cost."""
    if not isinstance(result, dict):
        return
    task.job_result = result
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
    task's hook like the summary operator's; a lookup that fails makes the total unknown, not the task."""
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


def lineage_on_complete(job_result: dict[str, Any] | None) -> OperatorLineage[Any, Any] | None:
    """Inputs: every S3 channel with its instance groups; output: the model artifact (None: no job seen)."""
    from airflow_hetero.lineage.openlineage import training_lineage

    if job_result is None:
        return None
    return training_lineage(job_result)
