"""HeteroLogSummaryOperator: the per-instance-group summary of a training job, to XCom and the task log.

The work is :func:`airflow_hetero.logs.summarize.summarize_training_job` with the clients of
:class:`airflow_hetero.hooks.training.HeteroTrainingHook` (same connection, region and endpoint as the
training operator). ``return_value`` is the whole summary, each group in it once (a task that needs one
group reads ``["groups"][name]``); the bottleneck verdict (:mod:`airflow_hetero.logs.verdict`) is
also pushed as ``verdict``, and what the job cost (``cost``, from ``prices`` and the Price List Query
API, :mod:`airflow_hetero.pricing`) as ``cost``. The job is ``job_name`` or the one the task
``training_task_id`` created (its ``training_job_name`` XCom key, pushed before it waits, so a
failed training task's job is summarised too); from that task's ``capacity_attempts`` key the summary
also says which clusters failed for lack of capacity before that job (docs/capacity.md), and from its
``service_job`` key (queue mode) what every attempt of the service job cost (``queue_attempts``; the ``cost``
XCom then also has ``attempts_total``, docs/queue.md).

Importing this module loads nothing beyond ``airflow.sdk``, the small
:mod:`airflow_hetero.logs.size_limit` and :mod:`~airflow_hetero.logs.verdict` (its thresholds are
checked at parse time) and the view's link: the log parser (only for custom ``error_patterns``), the
hook, boto3 and the Amazon provider are imported when they are needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import BaseOperator
from airflow_hetero.links.instance_groups import InstanceGroupsLink
from airflow_hetero.logs.size_limit import DEFAULT_MAX_XCOM_BYTES, MIN_MAX_XCOM_BYTES
from airflow_hetero.logs.verdict import Thresholds
from airflow_hetero.task_arguments import DEFAULT_AWS_CONN_ID, AwsSettings, TaskPrices, aws_template_fields
from airflow_hetero.xcom_keys import COST_XCOM_KEY, VERDICT_XCOM_KEY

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.logs.shape import BoundedSummary, LogSummary, RightSizingView
    from airflow_hetero.pricing.settings import PriceSettings


class HeteroLogSummaryOperator(AwsSettings, TaskPrices, BaseOperator):
    """Summarise a (heterogeneous) training job's logs and metrics per instance group.

    :param job_name: the training job (templated, e.g.
        ``"{{ ti.xcom_pull(task_ids='train', key='training_job_name') }}"``).
    :param training_task_id: instead of ``job_name``: the ``HeteroTrainingOperator`` task whose job to
        summarise, whether that task succeeded or failed (read from its ``training_job_name`` XCom key),
        with the capacity fallback it made (its ``capacity_attempts`` key).
    :param aws_conn_id, region_name, verify, botocore_config: the AWS connection, its region, TLS
        verification (False, or a CA bundle path) and ``botocore.config.Config`` options, as on the training
        operator (:mod:`airflow_hetero.task_arguments`).
    :param tail_lines: last lines kept per host.
    :param max_xcom_bytes: bound of the summary as JSON; tails shrink first, then error samples,
        and ``truncated`` says what was cut.
    :param error_patterns: regexes counting a line as an error (None: the defaults in
        :data:`airflow_hetero.logs.patterns.DEFAULT_ERROR_PATTERNS`).
    :param include_metrics: read CPU/memory/GPU/disk utilisation from CloudWatch.
    :param verdict_thresholds: overrides of :class:`airflow_hetero.logs.verdict.Thresholds`, e.g.
        ``{"busy_percent": 80, "waiting_percent": 40}`` (checked at DAG-parse time).
    :param capacity_overrides: instance type -> ``{"cpus": n, "gpus": n}`` where the built-in
        device counts are wrong for your hosts.
    :param series_points: points per group utilisation series in the summary (None: the default of
        :class:`airflow_hetero.logs.per_group.SeriesSpec`, 60).
    :param prices: instance type -> price per instance-hour in USD, e.g. ``{"ml.p4d.24xlarge": 37.69}``
        (negotiated rates; they win over the Price List Query API, ``pricing:GetProducts`` on the same
        connection), or a :class:`~airflow_hetero.pricing.settings.PriceSettings`: ``PriceSettings.of(prices,
        currency, use_pricing_api)`` for another currency of ``prices`` and of the summary's ``cost`` (the Price
        List is in USD: with another currency only ``prices`` price anything) or, ``use_pricing_api=False``, the
        Price List not asked. (``currency=`` and ``use_pricing_api=`` still work for one release, with a warning.)
    """

    template_fields: Sequence[str] = aws_template_fields("job_name")
    ui_color = "#e4f4ff"
    operator_extra_links = (InstanceGroupsLink(),)

    def __init__(
        self,
        *,
        job_name: str | None = None,
        training_task_id: str | None = None,
        aws_conn_id: str | None = DEFAULT_AWS_CONN_ID,
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        tail_lines: int = 20,
        max_xcom_bytes: int = DEFAULT_MAX_XCOM_BYTES,
        error_patterns: Sequence[str] | None = None,
        include_metrics: bool = True,
        verdict_thresholds: Mapping[str, float] | None = None,
        capacity_overrides: Mapping[str, Mapping[str, int]] | None = None,
        series_points: int | None = None,
        prices: Mapping[str, float] | PriceSettings | None = None,
        **kwargs: Any,
    ) -> None:
        self.set_prices(prices, kwargs)  # a bad price fails the parse
        super().__init__(**kwargs)
        self.set_aws_settings(aws_conn_id, region_name, verify, botocore_config)
        if (job_name is None) == (training_task_id is None):
            raise ValueError("give job_name or training_task_id (exactly one of them)")
        if tail_lines < 0:
            raise ValueError(f"tail_lines must be >= 0, got {tail_lines}")
        if max_xcom_bytes < MIN_MAX_XCOM_BYTES:
            raise ValueError(f"max_xcom_bytes must be at least {MIN_MAX_XCOM_BYTES}, got {max_xcom_bytes}")
        if error_patterns is not None:
            from airflow_hetero.logs.patterns import compile_patterns

            compile_patterns(error_patterns)  # a bad regex fails at DAG parse time, not after reading
        Thresholds.of(verdict_thresholds)  # so do bad thresholds
        if series_points is not None and series_points < 1:
            raise ValueError(f"series_points must be at least 1, got {series_points}")
        self.job_name = job_name
        self.training_task_id = training_task_id
        self.tail_lines = tail_lines
        self.max_xcom_bytes = max_xcom_bytes
        self.error_patterns = list(error_patterns) if error_patterns is not None else None
        self.include_metrics = include_metrics
        self.verdict_thresholds = dict(verdict_thresholds) if verdict_thresholds is not None else None
        self.capacity_overrides = (
            {name: dict(value) for name, value in capacity_overrides.items()} if capacity_overrides else None
        )
        self.series_points = series_points

    def training_job_name(self, context: Context) -> str:
        """``job_name``, or the name the ``training_task_id`` task pushed when it created its job."""
        if self.training_task_id is None:
            if not self.job_name:
                raise ValueError("job_name rendered empty: no training job to summarise")
            return self.job_name
        from airflow_hetero._compat import AirflowFailException
        from airflow_hetero.xcom_keys import JOB_NAME_XCOM_KEY

        name = context["ti"].xcom_pull(task_ids=self.training_task_id, key=JOB_NAME_XCOM_KEY)
        if not name:
            raise AirflowFailException(
                f"training_task_id={self.training_task_id!r}: that task pushed no {JOB_NAME_XCOM_KEY!r} XCom, so it "
                "created no training job (it failed before submitting one, or is not a HeteroTrainingOperator)"
            )
        return str(name)

    def execute(self, context: Context) -> BoundedSummary:
        """Read, summarise, log the table and the verdict, push ``verdict`` and ``cost``; return the
        whole summary."""
        from airflow_hetero.links.instance_groups import persist_instance_groups_link
        from airflow_hetero.logs.accessors import cost_of, queue_attempts_of, verdict_of
        from airflow_hetero.logs.per_group import CostSpec, SeriesSpec, VerdictSpec
        from airflow_hetero.logs.report import format_report
        from airflow_hetero.logs.summarize import summarize_training_job

        job_name = self.training_job_name(context)
        attempts = None
        if self.training_task_id is not None:  # the clusters it tried before, when it fell back
            from airflow_hetero.xcom_keys import CAPACITY_ATTEMPTS_XCOM_KEY

            attempts = context["ti"].xcom_pull(task_ids=self.training_task_id, key=CAPACITY_ATTEMPTS_XCOM_KEY)
        hook = self.make_hook()
        queue = None
        if self.training_task_id is not None:  # queue mode: the service job's earlier attempts, priced
            from airflow_hetero.operators.queue_summary import queue_input

            queue = queue_input(self, context, hook, job_name)
        summary = summarize_training_job(
            job_name,
            logs_client=hook.logs_client,
            cloudwatch_client=hook.cloudwatch_client if self.include_metrics else None,
            sagemaker_client=hook.conn,
            tail_lines=self.tail_lines,
            error_patterns=self.error_patterns,
            include_metrics=self.include_metrics,
            max_xcom_bytes=self.max_xcom_bytes,
            series=SeriesSpec(self.series_points) if self.series_points else None,
            verdict=VerdictSpec(Thresholds.of(self.verdict_thresholds)),
            cost=CostSpec(lambda types: hook.training_prices(types, self.price_settings), self.price_settings.currency),
            capacity_overrides=self.capacity_overrides,
            capacity_attempts=attempts if isinstance(attempts, list) else None,
            service_job=queue[0] if queue else None,
            earlier_attempts=queue[1] if queue else (),
        )
        self.log.info("Log summary of %s:\n%s", job_name, format_report(summary))
        ti = context["ti"]
        verdict = verdict_of(summary)  # a skeleton (the size bound's last resort) has none
        if verdict is not None:
            ti.xcom_push(key=VERDICT_XCOM_KEY, value=verdict)
        cost, queued = cost_of(summary), queue_attempts_of(summary)
        trace_summary(verdict, cost)
        if cost is not None:
            extra = {"attempts": len(queued["attempts"]), "attempts_total": queued["total"]} if queued else {}
            ti.xcom_push(key=COST_XCOM_KEY, value={**cost, **extra})
        if self.training_task_id is not None and "unmapped" in summary:  # a whole summary, not a skeleton
            summary = self.record_rightsizing(summary, context)
        persist_instance_groups_link(context)
        return summary

    def record_rightsizing(self, summary: LogSummary, context: Context) -> LogSummary:
        """When the training task right-sizes (its ``rightsizing`` XCom): push this run's record (the evidence
        its next run reads) and the decision the next run would be made with, log it, and show it in the
        summary (``rightsizing``: the Instance groups view's section). Never fails the summary."""
        from airflow_hetero.operators.rightsizing_records import record_next
        from airflow_hetero.xcom_keys import RECORD_XCOM_KEY, RIGHTSIZING_XCOM_KEY

        ti: Any = context["ti"]
        decision = ti.xcom_pull(task_ids=self.training_task_id, key=RIGHTSIZING_XCOM_KEY)
        if not isinstance(decision, Mapping):
            return summary
        try:
            record, upcoming = record_next(summary, decision, ti.run_id)
        except Exception as exc:  # the summary stands without it; the next run resets its evidence
            self.log.warning("Right-sizing: could not record this run: %s", exc)
            return summary
        ti.xcom_push(key=RECORD_XCOM_KEY, value=record)
        ti.xcom_push(key=RIGHTSIZING_XCOM_KEY, value=upcoming)
        from airflow_hetero.job.rightsizing import next_run_lines

        lines = next_run_lines(upcoming)
        self.log.info("%s", "\n".join(lines))
        view: RightSizingView = {
            "mode": upcoming["mode"],
            "next": upcoming["counts"],
            "next_types": dict(upcoming.get("types") or {}),
            "recommended_types": dict(upcoming.get("recommended_types") or {}),
            "lines": lines,
        }
        return {**summary, "rightsizing": view}


def trace_summary(verdict: Mapping[str, Any] | None, cost: Mapping[str, Any] | None) -> None:
    """Each group's busy %, state and cost, and the verdict, on the task's span (tracing on; never raises)."""
    from airflow_hetero.operators.job_trace import summary_attributes

    groups: dict[str, dict[str, Any]] = {}
    for name, judged in ((verdict or {}).get("groups") or {}).items():
        groups.setdefault(name, {}).update(busy_percent=judged.get("busy_percent"), state=judged.get("state"))
    for name, priced in ((cost or {}).get("groups") or {}).items():
        groups.setdefault(name, {})["cost"] = priced.get("cost")
    summary_attributes(groups, verdict)
