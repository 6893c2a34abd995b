"""Read a training job's log streams and instance metrics from CloudWatch with clients passed in.

Clients are duck-typed boto3 ``logs`` / ``cloudwatch`` clients (from ``boto3.client(...)`` or
:class:`airflow_hetero.hooks.training.HeteroTrainingHook`), so this module imports neither boto3 nor Airflow.
Logs: DescribeLogStreams with the prefix ``<job>/`` (50 per call, paginated), then GetLogEvents
forward from the head of each stream until the token repeats, a few streams at a time in threads.
Events go straight into a bounded accumulator page by page: memory does not grow with the number
of events. Every API call is counted, and every one retries throttling, 5xx answers and dropped
connections with bounded backoff (:mod:`airflow_hetero._retry`, ``retry_policy``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from airflow_hetero._retry import RetryPolicy, call_with_retry, error_code
from airflow_hetero.logs.shape import UTILIZATION_METRICS, Datapoint
from airflow_hetero.logs.streams import LOG_GROUP, StreamLog

METRICS_NAMESPACE = "/aws/sagemaker/TrainingJobs"
#: DescribeLogStreams returns at most 50 streams per call.
STREAMS_PER_PAGE = 50
#: GetMetricData takes at most 500 queries per call.
QUERIES_PER_CALL = 500
#: Backoff for every CloudWatch / CloudWatch Logs call: 8 attempts, 0.5 s doubling up to 10 s
#: (about 40 s of throttling survived per call at most).
LOG_RETRY_POLICY = RetryPolicy(max_attempts=8, base_delay=0.5, max_delay=10.0)


class ApiCalls:
    """Thread-safe count of API calls by action name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def add(self, action: str, n: int = 1) -> None:
        """Count ``n`` calls of ``action``."""
        with self._lock:
            self.counts[action] = self.counts.get(action, 0) + n

    @property
    def total(self) -> int:
        """All calls so far."""
        with self._lock:
            return sum(self.counts.values())

    def as_dict(self) -> dict[str, int]:
        """Counts by action plus ``total``."""
        with self._lock:
            return {**dict(sorted(self.counts.items())), "total": sum(self.counts.values())}


def counted_call(fn: Any, action: str, calls: ApiCalls, policy: RetryPolicy | None, **kwargs: Any) -> Any:
    """``fn(**kwargs)`` with transient errors retried per ``policy``; every attempt counted as ``action``."""

    def attempt(**inner: Any) -> Any:
        calls.add(action)
        return fn(**inner)

    return call_with_retry(attempt, policy=policy or LOG_RETRY_POLICY, what=action, **kwargs)


def list_job_streams(
    logs_client: Any,
    job_name: str,
    *,
    log_group: str = LOG_GROUP,
    calls: ApiCalls | None = None,
    retry_policy: RetryPolicy | None = None,
) -> list[str]:
    """Names of the job's log streams (prefix ``<job>/``); empty while the log group does not exist."""
    calls = calls or ApiCalls()
    names: list[str] = []
    kwargs: dict[str, Any] = {
        "logGroupName": log_group,
        "logStreamNamePrefix": f"{job_name}/",
        "limit": STREAMS_PER_PAGE,
    }
    while True:
        try:
            page = counted_call(logs_client.describe_log_streams, "DescribeLogStreams", calls, retry_policy, **kwargs)
        except Exception as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return names
            raise
        names.extend(s["logStreamName"] for s in page.get("logStreams") or ())
        token = page.get("nextToken")
        if not token or token == kwargs.get("nextToken"):
            return names
        kwargs["nextToken"] = token


def read_stream(
    logs_client: Any,
    stream: str,
    sink: Callable[[list[dict[str, Any]]], None],
    *,
    log_group: str = LOG_GROUP,
    start_token: str | None = None,
    stop_after_ms: int | None = None,
    calls: ApiCalls | None = None,
    retry_policy: RetryPolicy | None = None,
) -> str | None:
    """Hand every page of ``stream`` to ``sink`` from the head (or ``start_token``) to the current end.

    The end is where GetLogEvents returns the token that was sent; pages may be empty yet carry a
    new token, so an empty page does not end the read. ``stop_after_ms`` also ends it after a page
    reaching that event time (a running job's busy stream would otherwise never end). Returns the
    last token (resume from there).
    """
    calls = calls or ApiCalls()
    token = start_token
    while True:
        kwargs: dict[str, Any] = {"logGroupName": log_group, "logStreamName": stream, "startFromHead": True}
        if token is not None:
            kwargs["nextToken"] = token
        page = counted_call(logs_client.get_log_events, "GetLogEvents", calls, retry_policy, **kwargs)
        following: str | None = page.get("nextForwardToken")
        events = page.get("events")
        del page  # one page per thread in memory, not two
        reached = False
        if events:
            sink(events)
            reached = stop_after_ms is not None and int(events[-1].get("timestamp") or 0) >= stop_after_ms
        del events
        if following is None or following == token:
            return token
        if reached:
            return following
        token = following


def read_job_logs(
    logs_client: Any,
    job_name: str,
    new_log: Callable[[str], StreamLog],
    *,
    log_group: str = LOG_GROUP,
    max_workers: int = 4,
    max_rounds: int = 3,
    stop_after_ms: int | None = None,
    calls: ApiCalls | None = None,
    retry_policy: RetryPolicy | None = None,
) -> tuple[list[StreamLog], list[str]]:
    """Read all of a job's streams into accumulators made by ``new_log(stream_name)``.

    After reading, the streams are listed once more: a stream that appeared meanwhile (a host that
    started late) is read too, up to ``max_rounds`` listings. ``stop_after_ms`` bounds each stream
    (see :func:`read_stream`). Returns the accumulators in stream name order and the problems met
    (a stream deleted while being read).
    """
    if max_workers < 1:
        raise ValueError(f"max_workers must be at least 1, got {max_workers}")
    calls = calls or ApiCalls()
    logs: dict[str, StreamLog] = {}
    problems: list[str] = []

    def read_one(log: StreamLog) -> None:
        try:
            read_stream(
                logs_client,
                log.stream,
                log.add_events,
                log_group=log_group,
                stop_after_ms=stop_after_ms,
                calls=calls,
                retry_policy=retry_policy,
            )
        except Exception as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise
            problems.append(f"log stream {log.stream} disappeared while being read")

    for _ in range(max(max_rounds, 1)):
        fresh = [
            name
            for name in list_job_streams(
                logs_client, job_name, log_group=log_group, calls=calls, retry_policy=retry_policy
            )
            if name not in logs
        ]
        if not fresh:
            break
        batch = [new_log(name) for name in fresh]
        logs.update((log.stream, log) for log in batch)
        with ThreadPoolExecutor(max_workers=min(max_workers, len(batch))) as pool:
            for future in [pool.submit(read_one, log) for log in batch]:
                future.result()
    return [logs[name] for name in sorted(logs)], problems


def metric_period(start: datetime, end: datetime) -> int:
    """Seconds per datapoint: 60, or more so that one series stays within 1,440 points."""
    seconds = max((end - start).total_seconds(), 60.0)
    return max(60, math.ceil(seconds / 1440 / 60) * 60)


def read_utilization(
    cloudwatch_client: Any,
    job_name: str,
    hosts: Iterable[str],
    start: datetime,
    end: datetime,
    *,
    metrics: Iterable[str] = tuple(UTILIZATION_METRICS),
    calls: ApiCalls | None = None,
    retry_policy: RetryPolicy | None = None,
) -> dict[str, dict[str, list[Datapoint]]]:
    """Average and maximum per period of each host's instance metrics (dimension ``Host=<job>/<host>``).

    One GetMetricData call carries up to 500 plain MetricStat queries; no metric math (aggregation
    over hosts happens in :func:`airflow_hetero.logs.per_group.aggregate_utilization`).
    """
    calls = calls or ApiCalls()
    period = metric_period(start, end)
    queries: list[dict[str, Any]] = []
    index: dict[str, tuple[str, str, str]] = {}
    for host in hosts:
        for metric in metrics:
            for stat in ("Average", "Maximum"):
                query_id = f"q{len(queries)}"
                index[query_id] = (host, metric, stat)
                queries.append(
                    {
                        "Id": query_id,
                        "MetricStat": {
                            "Metric": {
                                "Namespace": METRICS_NAMESPACE,
                                "MetricName": metric,
                                "Dimensions": [{"Name": "Host", "Value": f"{job_name}/{host}"}],
                            },
                            "Period": period,
                            "Stat": stat,
                        },
                        "ReturnData": True,
                    }
                )
    points: dict[tuple[str, str], dict[float, list[float | None]]] = {}
    for offset in range(0, len(queries), QUERIES_PER_CALL):
        kwargs: dict[str, Any] = {
            "MetricDataQueries": queries[offset : offset + QUERIES_PER_CALL],
            "StartTime": start,
            "EndTime": end,
        }
        while True:
            page = counted_call(cloudwatch_client.get_metric_data, "GetMetricData", calls, retry_policy, **kwargs)
            for result in page.get("MetricDataResults") or ():
                host, metric, stat = index[result["Id"]]
                series = points.setdefault((host, metric), {})
                for stamp, value in zip(result.get("Timestamps") or (), result.get("Values") or (), strict=False):
                    moment = stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
                    slot = series.setdefault(moment.timestamp(), [None, None])
                    slot[0 if stat == "Average" else 1] = float(value)
            token = page.get("NextToken")
            if not token:
                break
            kwargs["NextToken"] = token
    out: dict[str, dict[str, list[Datapoint]]] = {}
    for (host, metric), series in points.items():
        if series:
            out.setdefault(host, {})[metric] = [(t, v[0], v[1]) for t, v in sorted(series.items())]
    return out
