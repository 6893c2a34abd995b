"""What the operator and the sensor share about a finished job: its asset event and its lineage.

``records_outputs`` wraps ``execute`` / ``execute_complete``: the result dict they return is kept
on the task (for the OpenLineage listener, which runs after success on the same task object) and,
when the task declares a model asset, becomes that asset event's extra. Importing it loads nothing
but this module: a DAG file pays only for what parsing needs.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_hetero._compat import Asset, Context
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.pricing.billing import BilledCost
    from airflow_hetero.pricing.settings import PriceSettings

    F = TypeVar("F", bound=Callable[..., Any])  # for type checkers only: creating it costs a parse

log = logging.getLogger(__name__)


def records_outputs(method: F) -> F:
    """Decorate ``execute``-like methods: keep their result dict and fill the model asset's event."""

    @functools.wraps(method)
    def wrapper(self: JobOutputsMixin, context: Context, *args: Any, **kwargs: Any) -> Any:
        result = method(self, context, *args, **kwargs)
        self.record_job_outputs(context, result)
        return result

    return cast("F", wrapper)


class JobOutputsMixin:
    """Model asset declaration and emission, and ``get_openlineage_facets_on_complete``."""

    task_id: str
    outlets: Any
    model_asset: Asset | None = None
    #: The result dict of the job this task saw finish (None before, or when it did not wait).
    job_result: dict[str, Any] | None = None
    #: What prices the run's cost in the asset's extra (set by the task's ``__init__``).
    price_settings: PriceSettings

    make_hook: Callable[[], HeteroTrainingHook]  # the task's own (AwsSettings.make_hook)

    def declare_model_asset(self, model_asset: Asset | str | None) -> Asset | None:
        """Add the model asset (an Asset, or its URI) to the task's outlets; return it."""
        if model_asset is None:
            return None
        from airflow_hetero._compat import Asset

        asset = Asset(model_asset) if isinstance(model_asset, str) else model_asset
        self.outlets = [*(self.outlets or []), asset]
        return asset

    def record_job_outputs(self, context: Context, result: Any) -> None:
        """Keep the result; give the model asset's event the job's name, artifact, groups and metrics."""
        if not isinstance(result, dict):
            return
        self.job_result = result
        if self.model_asset is None:
            return
        from airflow_hetero._compat import AirflowFailException
        from airflow_hetero.lineage.assets import artifact_outside_asset, model_asset_extra

        if result.get("status") != "Completed":
            raise AirflowFailException(
                f"Task {self.task_id}: job {result.get('training_job_name')} ended {result.get('status')}, "
                f"so there is no model for asset {self.model_asset.uri}"
            )
        problem = artifact_outside_asset(self.model_asset.uri, result)
        if problem:
            raise AirflowFailException(f"Task {self.task_id}: {problem}; set model_asset to the job's output_path")
        context["outlet_events"][self.model_asset].extra = model_asset_extra(result, self.run_cost(result))

    def run_cost(self, result: dict[str, Any]) -> BilledCost:
        """What the run cost (:func:`airflow_hetero.pricing.billing.billed_cost`), its groups priced through the
        task's hook like the summary operator's; a lookup that fails makes the total unknown, not the task."""
        from airflow_hetero.pricing.billing import billed_cost
        from airflow_hetero.pricing.price_list import unknown

        groups = list(result.get("instance_groups") or [])
        types = sorted({str(g["type"]) for g in groups if g.get("type")})
        currency = self.price_settings.currency
        try:
            prices = self.make_hook().training_prices(types, self.price_settings)
        except Exception as exc:  # the job is done and its model is good: a price must not fail the task
            log.warning("No prices for the model asset's cost of %s: %s", result.get("training_job_name"), exc)
            why = f"the price lookup failed ({type(exc).__name__}: {exc})"
            prices = {t: unknown(t, currency, why) for t in types}
        return billed_cost(groups, result.get("billable_seconds"), prices, currency=currency)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any] | None:
        """Inputs: every S3 channel with its instance groups; output: the model artifact."""
        from airflow_hetero.lineage.openlineage import training_lineage

        if self.job_result is None:
            return None
        return training_lineage(self.job_result)
