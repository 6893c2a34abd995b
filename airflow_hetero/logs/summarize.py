"""``summarize_training_job``: the per-instance-group summary of a SageMaker training job, as a plain dict.

Its shape is :class:`airflow_hetero.logs.shape.LogSummary` (or, when even the cut summary is too
big, :class:`~airflow_hetero.logs.shape.SummarySkeleton`).

For ``@task`` users and for :class:`airflow_hetero.operators.log_summary.HeteroLogSummaryOperator`.
Takes already-built clients (plain boto3 ones or those of
:class:`airflow_hetero.hooks.training.HeteroTrainingHook`), so importing it loads neither boto3 nor Airflow.
What the summary adds beyond the logs is asked for with the specs :func:`~airflow_hetero.logs.per_group.build_summary`
takes: ``series=SeriesSpec(points=...)``, ``verdict=VerdictSpec(Thresholds.of({...}))``,
``cost=CostSpec(prices, currency)`` (the flat ``series_points``, ``verdict_thresholds``, ``prices`` and
``currency`` of earlier releases still work for this one, with a warning: :mod:`airflow_hetero.logs.flat_keywords`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_hetero._retry import RetryPolicy
from airflow_hetero.job.resource_config import instance_groups
from airflow_hetero.logs.accessors import capacity_attempts_of
from airflow_hetero.logs.cloudwatch import ApiCalls, counted_call, metric_period, read_job_logs, read_utilization
from airflow_hetero.logs.mapping import resolve_mapping
from airflow_hetero.logs.patterns import LineRules
from airflow_hetero.logs.per_group import (
    DEFAULT_PERIOD,
    TERMINAL_STATUSES,
    CostSpec,
    SeriesSpec,
    VerdictSpec,
    build_summary,
    training_window,
)
from airflow_hetero.logs.queue_attempts import queue_attempts
from airflow_hetero.logs.series import SERIES_METRICS
from airflow_hetero.logs.shape import BoundedSummary, QueueAttempt
from airflow_hetero.logs.size_limit import DEFAULT_MAX_XCOM_BYTES, enforce_size_limit
from airflow_hetero.logs.streams import DEFAULT_MAX_ERROR_SAMPLES, LOG_GROUP, StreamLog, host_from_stream
from airflow_hetero.pricing.price_list import PRICE_LIST_CURRENCY

#: How much of a capacity attempt's reason the summary keeps (its code and the service's sentence).
ATTEMPT_REASON_CHARS = 300

__all__ = ["DEFAULT_MAX_XCOM_BYTES", "CostSpec", "SeriesSpec", "VerdictSpec", "summarize_training_job"]


def summarize_training_job(
    job_name: str,
    *,
    logs_client: Any,
    cloudwatch_client: Any = None,
    sagemaker_client: Any,
    tail_lines: int = 20,
    error_patterns: Iterable[str] | None = None,
    warning_patterns: Iterable[str] | None = None,
    include_metrics: bool = True,
    max_xcom_bytes: int = DEFAULT_MAX_XCOM_BYTES,
    metric_definitions: Iterable[Mapping[str, Any]] | None = None,
    max_error_samples: int = DEFAULT_MAX_ERROR_SAMPLES,
    max_workers: int = 4,
    log_group: str = LOG_GROUP,
    now: datetime | None = None,
    retry_policy: RetryPolicy | None = None,
    series: SeriesSpec | None = None,
    verdict: VerdictSpec | None = None,
    cost: CostSpec | None = None,
    capacity_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    capacity_attempts: Iterable[Mapping[str, Any]] | None = None,
    service_job: Mapping[str, Any] | None = None,
    earlier_attempts: Sequence[QueueAttempt] = (),
    **deprecated: Any,
) -> BoundedSummary:
    """Read the job's description, log streams and (optionally) instance metrics; summarise per group.

    :param error_patterns: regexes counting a line as an error (None: tracebacks, ERROR/CRITICAL,
        CUDA/NCCL errors, OOM kills; see :data:`airflow_hetero.logs.patterns.DEFAULT_ERROR_PATTERNS`).
    :param metric_definitions: ``[{"Name", "Regex"}]``; None means the job's own MetricDefinitions.
    :param max_xcom_bytes: size bound of the returned dict as JSON (tails shrink first, then error
        samples, then per-host lists; ``truncated`` says what was cut; any number of streams fits).
    :param retry_policy: backoff for throttling, 5xx and dropped connections on every call (default
        :data:`airflow_hetero.logs.cloudwatch.LOG_RETRY_POLICY`).
    :param series: the points per group utilisation series (``groups.<name>.series``), e.g.
        ``SeriesSpec(points=30)`` (None: :data:`~airflow_hetero.logs.series.DEFAULT_SERIES_POINTS`); its axis
        and period are the metrics query's, so a spec that sets them is refused.
    :param verdict: the verdict's thresholds (``verdict`` key), e.g. ``VerdictSpec(Thresholds.of({"busy_percent":
        75}))`` (None: :class:`airflow_hetero.logs.verdict.Thresholds`' defaults).
    :param cost: ``CostSpec(prices, currency)``: instance type ->
        :class:`~airflow_hetero.pricing.price_list.Price` in ``currency``, or a function of the job's instance
        types returning them (``HeteroTrainingHook.training_prices``); given, the summary has ``cost`` and the
        verdict's suggestions their ``effect`` (None: neither).
    :param capacity_overrides: instance type -> ``{"cpus", "gpus"}`` for the per-device figures.
    :param capacity_attempts: the training operator's ``capacity_attempts`` (clusters that failed for
        lack of capacity before this job); non-empty, the summary keeps them, each reason's first
        :data:`ATTEMPT_REASON_CHARS` characters. Everything else is this job's own (its Describe).
    :param service_job: in queue mode, the DescribeServiceJob answer of the service job this job is an
        attempt of, with ``earlier_attempts`` (:func:`airflow_hetero.logs.queue_attempts.earlier_attempts`):
        the summary's ``queue_attempts`` says every attempt's cost and their total (docs/queue.md), in
        ``cost``'s currency.
    :param deprecated: ``series_points``, ``verdict_thresholds``, ``prices`` and ``currency``, the flat
        spellings of ``series``, ``verdict`` and ``cost`` (this release only: ``DeprecationWarning``; beside the
        spec they spell, ``ValueError``).
    Works on a running job too (``partial`` is then True). Raises ValueError for bad arguments or
    patterns before any log is read; service errors (e.g. an unknown job) propagate.
    """
    if deprecated:
        from airflow_hetero.logs.flat_keywords import from_flat_keywords

        series, verdict, cost = from_flat_keywords(deprecated, series, verdict, cost)
    series = series or SeriesSpec()
    if series.axis is not None or series.period != DEFAULT_PERIOD:
        raise ValueError("series: give SeriesSpec(points=...) alone (the axis and period are the metrics query's)")
    if tail_lines < 0:
        raise ValueError(f"tail_lines must be >= 0, got {tail_lines}")
    if max_error_samples < 0:
        raise ValueError(f"max_error_samples must be >= 0, got {max_error_samples}")
    if include_metrics and cloudwatch_client is None:
        raise ValueError("include_metrics=True needs a cloudwatch_client")
    calls = ApiCalls()
    describe = dict(
        counted_call(
            sagemaker_client.describe_training_job, "DescribeTrainingJob", calls, retry_policy, TrainingJobName=job_name
        )
    )
    describe.pop("ResponseMetadata", None)
    if metric_definitions is None:
        metric_definitions = (describe.get("AlgorithmSpecification") or {}).get("MetricDefinitions") or ()
    rules = LineRules.build(error_patterns, warning_patterns, metric_definitions)

    def new_log(stream: str) -> StreamLog:
        return StreamLog(
            stream,
            host_from_stream(stream, job_name),
            rules,
            tail_lines=tail_lines,
            max_error_samples=max_error_samples,
        )

    # A running job's streams keep growing: read up to the moment reading started, not forever.
    running = describe.get("TrainingJobStatus") not in TERMINAL_STATUSES
    stop_after_ms = int((now or datetime.now(UTC)).timestamp() * 1000) if running else None
    logs, problems = read_job_logs(
        logs_client,
        job_name,
        new_log,
        log_group=log_group,
        max_workers=max_workers,
        stop_after_ms=stop_after_ms,
        calls=calls,
        retry_policy=retry_policy,
    )
    mapping = resolve_mapping(logs, instance_groups(describe))
    datapoints = None
    axis: tuple[float, float] | None = None
    window_dt: tuple[datetime, datetime] | None = None
    if include_metrics:
        datapoints = {}
        window = training_window(describe, now)
        hosts = sorted({*mapping.host_to_group, *mapping.unmapped})
        if window is not None and hosts:
            # From the start of the minute training started in (periods start on whole minutes)
            # to a minute after it ended; the query's range is the window, so no clipping after.
            start = datetime.fromtimestamp(window[0] // 60 * 60, tz=UTC)
            end = datetime.fromtimestamp(window[1], tz=UTC) + timedelta(minutes=1)
            axis, window_dt = (start.timestamp(), end.timestamp()), (start, end)
            datapoints = read_utilization(
                cloudwatch_client,
                job_name,
                hosts,
                start,
                end,
                metrics=tuple(SERIES_METRICS),
                calls=calls,
                retry_policy=retry_policy,
            )
    summary = build_summary(
        job_name,
        describe,
        logs,
        tail_lines=tail_lines,
        max_error_samples=max_error_samples,
        datapoints=datapoints,
        mapping=mapping,
        now=now,
        clip_datapoints=False,
        read_problems=problems,
        series=SeriesSpec(series.points, axis, metric_period(*window_dt) if window_dt else DEFAULT_PERIOD),
        verdict=verdict or VerdictSpec(),
        capacity_overrides=capacity_overrides,
        cost=cost,
        api_calls=calls.as_dict(),
    )
    attempts = capacity_attempts_of({"capacity_attempts": list(capacity_attempts or ())})
    if attempts:
        summary["capacity_attempts"] = [{**a, "reason": a["reason"][:ATTEMPT_REASON_CHARS]} for a in attempts]
    if service_job is not None:
        currency = cost.currency if cost else PRICE_LIST_CURRENCY
        summary["queue_attempts"] = queue_attempts(service_job, earlier_attempts, summary, currency=currency)
    return enforce_size_limit(summary, max_xcom_bytes)
