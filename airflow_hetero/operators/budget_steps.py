"""The operator's budget (``max_cost``): the runtime cap of each job it submits, and the task's error when
SageMaker stopped a job at that cap (docs/cost.md).

Imported when the task runs, never at DAG parse; the arithmetic is :mod:`airflow_hetero.job.budget`'s.
:func:`fit_budget` prices the request's cluster and the task instance's earlier jobs (the hook's
``training_prices``: the operator's price settings, then the Price List Query API), and writes the cap into
the request; a budget that cannot hold refuses before anything is submitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from airflow_hetero._compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.job.outcome import TrainingJobLimitError
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.pricing.settings import PriceSettings


class BudgetTask(Protocol):
    """What the budget reads of the task."""

    @property
    def max_cost(self) -> Any: ...

    @property
    def log(self) -> Any: ...


def fit_budget(
    hook: HeteroTrainingHook,
    request: dict[str, Any],
    earlier: Sequence[Mapping[str, Any]],
    *,
    max_cost: Any,
    settings: PriceSettings,
    min_runtime: int,
    stop_window: int,
    task_id: str,
    log: Any,
) -> dict[str, Any]:
    """``request`` with the runtime cap ``max_cost`` allows after the ``earlier`` jobs; AirflowFailException
    (no retry can make it fit) when a price is unknown or the budget is below ``min_runtime``."""
    from airflow_hetero.job.budget import (
        BudgetError,
        capped_request,
        check_max_cost,
        instance_types_of,
        plan_request_budget,
    )
    from airflow_hetero.pricing.settings import price_sources

    try:
        budget = check_max_cost(max_cost)
        if budget is None:
            return request
        found = hook.training_prices(instance_types_of([request, *earlier]), settings)
        plan = plan_request_budget(
            request,
            earlier,
            {name: (price.per_hour, price.reason) for name, price in found.items()},
            max_cost=budget,
            sources=price_sources(settings.overrides, settings.use_api),
            min_runtime=min_runtime,
            stop_window=stop_window,
            currency=settings.currency,
        )
    except BudgetError as err:
        raise AirflowFailException(f"Task {task_id}: budget: {err}") from err
    log.info("%s", plan.describe(settings.currency))
    return capped_request(request, plan)


def budget_stop(hook: HeteroTrainingHook, err: TrainingJobLimitError, log: Any) -> TrainingJobLimitError:
    """``err`` as the budget's error when SageMaker stopped the job at the cap a budget set (its tag), else
    ``err`` itself."""
    from airflow_hetero.job.budget import budget_cap_in_tags, budget_stop_message
    from airflow_hetero.job.outcome import TrainingJobBudgetError

    try:
        describe = hook.describe_training_job(err.job_name)
        arn = describe.get("TrainingJobArn")
        tags = hook.call(hook.conn.list_tags, f"ListTags {arn}", ResourceArn=arn).get("Tags") or [] if arn else []
    except Exception as exc:  # the limit's own error still says what happened
        log.warning("Could not tell whether a budget stopped %s: %s", err.job_name, exc)
        return err
    message = budget_stop_message(describe, budget_cap_in_tags(tags))
    if message is None:
        return err
    return TrainingJobBudgetError(
        message, job_name=err.job_name, status=err.status, failure_reason=err.failure_reason, describe=err.describe
    )


def budget_stopped(task: BudgetTask, run: TrainingRun, err: TrainingJobLimitError) -> TrainingJobLimitError:
    """The budget's error for a job SageMaker stopped at the cap a budget set; ``err`` otherwise (no budget, or a
    limit the job was given itself)."""
    if task.max_cost is None:
        return err
    stopped = budget_stop(run.hook, err, task.log)
    if stopped is not err:
        record_budget_stop(run.context, stopped)
    return stopped


def record_budget_stop(context: Mapping[str, Any], err: TrainingJobLimitError) -> None:
    """Push the budget's stop (``budget_stop``: the job and the task's message) before the task fails with it: the
    Runs view marks the run with it (docs/instance-groups.md)."""
    from airflow_hetero.xcom_keys import BUDGET_STOP_XCOM_KEY

    context["ti"].xcom_push(key=BUDGET_STOP_XCOM_KEY, value={"job_name": err.job_name, "message": str(err)})
