"""HeteroTrainingSensor: wait for a training job started elsewhere (usually by the operator).

Works in ``poke`` and ``reschedule`` modes and deferred through the same trigger as the
operator. Nothing about the job is kept on ``self`` between pokes (reschedule mode builds a fresh
instance for every poke): each poke is one DescribeTrainingJob. On Completed the sensor returns
the same dict as the operator (via ``PokeReturnValue``, so it becomes XCom ``return_value``);
Failed and, unless ``fail_on_stopped=False``, Stopped fail the task.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import BaseSensorOperator, PokeReturnValue, default_deferrable
from airflow_hetero.task_arguments import DEFAULT_AWS_CONN_ID, AwsSettings, TaskPrices, aws_template_fields

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_hetero._compat import Asset, Context
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.pricing.billing import BilledCost
    from airflow_hetero.pricing.settings import PriceSettings


class HeteroTrainingSensor(AwsSettings, TaskPrices, BaseSensorOperator):
    """Wait until the SageMaker training job ``job_name`` finishes; return its result dict.

    :param job_name: the job to watch (templated), e.g.
        ``"{{ ti.xcom_pull('train')['training_job_name'] }}"``.
    :param aws_conn_id, region_name, verify, botocore_config: the AWS connection, its region, TLS
        verification (False, or a CA bundle path) and ``botocore.config.Config`` options, as on the Amazon
        provider's operators (:mod:`airflow_hetero.task_arguments`).
    :param fail_on_stopped: a Stopped job fails the task (default) or counts as done.
    :param print_log: when the job has finished, print the last ``log_tail_lines`` lines of
        every host, prefixed ``[group/host]``.
    :param log_tail_lines: lines per log stream printed with ``print_log``.
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param model_asset: an Asset (or its URI, normally the job's ``output_path``) this task updates
        when the job completes; the event's extra holds the job name, model artifact, instance
        groups, final metrics and the run's cost (docs/lineage.md).
    :param prices: instance type -> price per instance-hour in USD for that cost (they win over the Price List
        Query API), or a :class:`~airflow_hetero.pricing.settings.PriceSettings` (another currency, or the Price
        List not asked), as on the training operator. (``currency=`` and ``use_pricing_api=`` still work for one
        release, with a warning.)
    """

    template_fields: Sequence[str] = aws_template_fields("job_name")
    ui_color = "#f0eee4"

    def __init__(
        self,
        *,
        job_name: str,
        aws_conn_id: str | None = DEFAULT_AWS_CONN_ID,
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        fail_on_stopped: bool = True,
        print_log: bool = False,
        log_tail_lines: int = 50,
        deferrable: bool | None = None,
        model_asset: Asset | str | None = None,
        prices: Mapping[str, float] | PriceSettings | None = None,
        **kwargs: Any,
    ) -> None:
        self.set_prices(prices, kwargs)  # a bad price fails the parse
        super().__init__(**kwargs)
        self.set_aws_settings(aws_conn_id, region_name, verify, botocore_config)
        self.model_asset: Asset | None = None
        if model_asset is not None:
            from airflow_hetero.lineage.outputs import declare_model_asset

            self.model_asset = declare_model_asset(self, model_asset)
        #: The result dict of the job this task saw finish or fail (the lineage listener reads it), and its cost.
        self.job_result: dict[str, Any] | None = None
        self.job_cost: BilledCost | None = None
        self.job_name = job_name
        self.fail_on_stopped = fail_on_stopped
        self.print_log = print_log
        self.log_tail_lines = log_tail_lines
        self.deferrable = default_deferrable() if deferrable is None else deferrable

    def recorded(self, context: Context, outcome: Callable[[], Any]) -> Any:
        """``outcome()`` (``execute`` or the resume), its job kept for the lineage listener and the model asset."""
        from airflow_hetero.lineage.outputs import recorded

        return recorded(self, context, outcome)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any] | None:
        """Inputs: every S3 channel with its instance groups; output: the model artifact; the job's run facets."""
        from airflow_hetero.lineage.outputs import lineage_on_complete

        return lineage_on_complete(self, task_instance)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage[Any, Any] | None:
        """The same facets for a job that failed (no model output); None when the task saw no job end."""
        from airflow_hetero.lineage.outputs import lineage_on_failure

        return lineage_on_failure(self, task_instance)

    def execute(self, context: Context) -> Any:
        """Poke/reschedule as usual, or defer to the trigger when ``deferrable``."""
        if not self.deferrable:
            return self.recorded(context, lambda: super(HeteroTrainingSensor, self).execute(context))
        result = self.recorded(context, lambda: self.poke(context))
        if result.is_done:
            return self.recorded(context, lambda: result.xcom_value)
        from airflow_hetero.triggers.training import HeteroTrainingTrigger

        self.defer(
            trigger=HeteroTrainingTrigger(
                self.job_name,
                **self.aws_settings(),
                poll_interval=float(self.poke_interval),
                deadline=time.time() + float(self.timeout),
            ),
            method_name="execute_complete",
        )

    def poke(self, context: Context) -> PokeReturnValue:
        """One DescribeTrainingJob: not done while running; result dict or failure when finished."""
        from airflow_hetero._retry import is_transient
        from airflow_hetero.job.outcome import classify, resolve_outcome

        hook = self.make_hook()
        try:
            describe = hook.describe_training_job(self.job_name)
        except Exception as exc:
            if not is_transient(exc):
                raise
            self.log.warning("Training job %s: transient error, will poke again: %s", self.job_name, exc)
            return PokeReturnValue(is_done=False)
        transitions = describe.get("SecondaryStatusTransitions") or [{}]
        self.log.info(
            "Training job %s: %s / %s %s",
            self.job_name,
            describe.get("TrainingJobStatus"),
            describe.get("SecondaryStatus"),
            transitions[-1].get("StatusMessage") or "",
        )
        if classify(describe) == "running":
            return PokeReturnValue(is_done=False)
        if self.print_log:
            self._print_tail(hook, describe)
        return PokeReturnValue(is_done=True, xcom_value=resolve_outcome(describe, fail_on_stopped=self.fail_on_stopped))

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after deferral: same outcome rules and XCom as a poke."""
        from airflow_hetero.job.outcome import outcome_from_event

        hook = self.make_hook()
        if self.print_log and event.get("status") == "done":
            self._print_tail(hook, None)
        result = self.recorded(
            context,
            lambda: outcome_from_event(
                event,
                describe=hook.describe_training_job,
                stop=None,
                fail_on_stopped=self.fail_on_stopped,
                timeout_message=f"did not finish within the sensor timeout ({self.timeout}s)",
            ),
        )
        return dict(result)

    def _print_tail(self, hook: HeteroTrainingHook, describe: dict[str, Any] | None) -> None:
        tailer = hook.log_tailer(self.job_name, emit=lambda line: self.log.info("%s", line), describe=describe)
        try:
            tailer.emit_tail(lines=self.log_tail_lines)
        except Exception as exc:  # logs are a convenience: never fail the sensor over them
            self.log.warning("Could not read the logs of training job %s: %s", self.job_name, exc)
