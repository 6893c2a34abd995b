"""Assemble the per-group summary of a training job from stream accumulators and DescribeTrainingJob (pure).

Inputs are already read: :class:`airflow_hetero.logs.streams.StreamLog` objects (one per log stream), the
DescribeTrainingJob answer and utilisation datapoints. The output is a plain JSON-serialisable dict
(the XCom ``return_value``); :mod:`airflow_hetero.logs.size_limit` bounds its size and
:mod:`airflow_hetero.logs.table` renders it for the task log. No Airflow, boto3 or botocore here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_hetero.job.resource_config import GroupSpec, instance_groups
from airflow_hetero.logs.capacity import capacity_of, per_device_series, per_device_utilization
from airflow_hetero.logs.cost import job_cost
from airflow_hetero.logs.mapping import HostMapping, resolve_mapping
from airflow_hetero.logs.series import DEFAULT_SERIES_POINTS, group_series
from airflow_hetero.logs.shape import (
    UTILIZATION_METRICS,
    Datapoint,
    ErrorSampleEntry,
    GroupSummary,
    JobOverview,
    LogPart,
    LogSummary,
    TimelineStep,
    UnmappedSection,
    Utilization,
)
from airflow_hetero.logs.streams import (
    ErrorSample,
    MetricValue,
    StreamLog,
)
from airflow_hetero.logs.text import iso, strip_control
from airflow_hetero.logs.verdict import Thresholds, judge_groups
from airflow_hetero.pricing.price_list import PRICE_LIST_CURRENCY, Price, check_currency
from airflow_hetero.sagemaker_facts import Capacity

TERMINAL_STATUSES = frozenset({"Completed", "Failed", "Stopped"})

_SURROGATES = re.compile("[\ud800-\udfff]")
_NATURAL = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key putting ``algo-2`` before ``algo-10``."""
    return tuple(int(part) if part.isdigit() else part for part in _NATURAL.split(text))


def clean_text(text: str) -> str:
    """Lone surrogates (from undecodable bytes) as U+FFFD, so the text encodes as UTF-8; control
    characters and ANSI escapes removed, so a tail or sample is safe to print."""
    text = _SURROGATES.sub("\ufffd", text) if not text.isascii() else text
    return text if text.isprintable() else strip_control(text)


def clean_values(value: Any) -> Any:
    """``value`` with :func:`clean_text` applied to every string in it, dict keys included; anything
    else is returned as it is (the same object when nothing needed cleaning).

    The summary's names (groups, hosts, streams, instance types) and problems come from the job's own
    logs and description; this keeps their control characters out of every returned value. A key
    that would clash with another once cleaned keeps its escapes in printable form (``ascii``).
    """
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        cleaned: dict[Any, Any] = {}
        for key, item in value.items():
            name = clean_values(key)
            if name in cleaned and name != key:
                name = ascii(key)[1:-1]
            cleaned[name] = clean_values(item)
        return cleaned
    if isinstance(value, list):
        return [clean_values(item) for item in value]
    return value


def _seconds(value: Any) -> float | None:
    """datetime -> epoch seconds (naive datetimes are UTC)."""
    if not isinstance(value, datetime):
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def training_window(describe: Mapping[str, Any], now: datetime | None = None) -> tuple[float, float] | None:
    """(start, end) in epoch seconds: TrainingStartTime to TrainingEndTime, or to now while running."""
    start = _seconds(describe.get("TrainingStartTime"))
    if start is None:
        return None
    end = _seconds(describe.get("TrainingEndTime"))
    if end is None:
        if describe.get("TrainingJobStatus") in TERMINAL_STATUSES:
            end = _seconds(describe.get("LastModifiedTime"))
        end = end or (now or datetime.now(UTC)).timestamp()
    return start, max(start, end)


def job_overview(describe: Mapping[str, Any], now: datetime | None = None) -> JobOverview:
    """Job-level part: status, secondary-status timeline with durations, billable/training seconds."""
    now_s = (now or datetime.now(UTC)).timestamp()
    status = describe.get("TrainingJobStatus")
    timeline: list[TimelineStep] = []
    for item in describe.get("SecondaryStatusTransitions") or ():
        start, end = _seconds(item.get("StartTime")), _seconds(item.get("EndTime"))
        ongoing = end is None and status not in TERMINAL_STATUSES
        stop = end if end is not None else (now_s if ongoing else None)
        timeline.append(
            {
                "status": item.get("Status"),
                "start": iso(item.get("StartTime")),
                "end": iso(item.get("EndTime")),
                "seconds": round(stop - start, 3) if start is not None and stop is not None else None,
                "ongoing": ongoing,
                "message": item.get("StatusMessage"),
            }
        )
    window = training_window(describe, now)
    return {
        "status": status,
        "secondary_status": describe.get("SecondaryStatus"),
        "failure_reason": describe.get("FailureReason"),
        "partial": status not in TERMINAL_STATUSES,
        "timeline": timeline,
        "billable_seconds": describe.get("BillableTimeInSeconds"),
        "training_seconds": describe.get("TrainingTimeInSeconds"),
        "training_window": (
            {
                "start": iso(window[0] * 1000),
                "end": iso(window[1] * 1000),
                "seconds": round(window[1] - window[0], 3),
            }
            if window
            else None
        ),
    }


def instance_seconds(count: int, describe: Mapping[str, Any], now: datetime | None = None) -> float | None:
    """Instance-seconds of a group: count x BillableTimeInSeconds (AWS's rule for multi-instance jobs),
    else count x TrainingTimeInSeconds, else count x the training window so far."""
    for key in ("BillableTimeInSeconds", "TrainingTimeInSeconds"):
        if describe.get(key) is not None:
            return float(count * int(describe[key]))
    window = training_window(describe, now)
    return round(count * (window[1] - window[0]), 3) if window else None


def spot_saved_instance_seconds(count: int, describe: Mapping[str, Any]) -> float | None:
    """A managed spot group's instance time not billed: count x (TrainingTimeInSeconds - BillableTimeInSeconds);
    None for an on-demand job or while either is unknown."""
    training, billable = describe.get("TrainingTimeInSeconds"), describe.get("BillableTimeInSeconds")
    if describe.get("EnableManagedSpotTraining") is not True or training is None or billable is None:
        return None
    return float(count * max(0, int(training) - int(billable)))


def aggregate_utilization(
    hosts: Iterable[str],
    datapoints: Mapping[str, Mapping[str, Iterable[Datapoint]]],
    window: tuple[float, float] | None = None,
) -> Utilization:
    """Average and maximum of CPU, memory, GPU and GPU memory over ``hosts`` and ``window``.

    ``datapoints`` is host -> CloudWatch metric name -> (epoch seconds, average, maximum). The
    average is the mean of the per-period averages over all hosts; the maximum is the largest
    per-period maximum. Values are SageMaker's (percent summed over the instance's CPUs or GPUs).
    A metric without datapoints is None.
    """
    result: Utilization = {"cpu": None, "memory": None, "gpu": None, "gpu_memory": None}
    host_list = list(hosts)
    for metric, key in UTILIZATION_METRICS.items():
        total, count, peak, with_data = 0.0, 0, -math.inf, 0
        for host in host_list:
            seen = False
            for stamp, average, maximum in datapoints.get(host, {}).get(metric, ()):
                if window is not None and not (window[0] - 60 <= stamp <= window[1]):
                    continue
                if average is not None:
                    total += average
                    count += 1
                    seen = True
                top = maximum if maximum is not None else average
                if top is not None:
                    peak = max(peak, top)
                    seen = True
            with_data += seen
        result[key] = (
            {
                "avg": round(total / count, 2) if count else None,
                "max": round(peak, 2) if peak > -math.inf else None,
                "hosts": with_data,
                "datapoints": count,
            }
            if with_data
            else None
        )
    return result


def _sample_dict(sample: ErrorSample) -> ErrorSampleEntry:
    out: ErrorSampleEntry = {
        "host": sample.host,
        "time": iso(sample.timestamp),
        "line": clean_text(sample.line),
    }
    if sample.exception:
        out["exception"] = clean_text(sample.exception)
    return out


def merge_logs(logs: Sequence[StreamLog], tail_lines: int, max_error_samples: int) -> LogPart:
    """Counters, error samples (earliest first), per-host tails and metrics of several streams."""
    metrics: dict[str, MetricValue] = {}
    for log in logs:
        for name, value in log.metrics.items():
            if name in metrics:
                metrics[name].merge(value)
            else:
                metrics[name] = MetricValue(value.goal, value.last, value.last_time, value.best, value.count)
    samples = sorted((s for log in logs for s in log.error_samples), key=lambda s: (s.timestamp, s.host))
    tails: dict[str, list[tuple[int, int, int, str]]] = {}
    for order, log in enumerate(logs):
        tails.setdefault(log.host, []).extend((ts, order, i, line) for i, (ts, line) in enumerate(log.tail))
    firsts = [log.first_time for log in logs if log.first_time is not None]
    lasts = [log.last_time for log in logs if log.last_time is not None]
    return {
        "log_streams": sorted((log.stream for log in logs), key=natural_key),
        "events": sum(log.events for log in logs),
        "bytes": sum(log.byte_count for log in logs),
        "first_event": iso(min(firsts)) if firsts else None,
        "last_event": iso(max(lasts)) if lasts else None,
        "errors": sum(log.errors for log in logs),
        "warnings": sum(log.warnings for log in logs),
        "error_samples": [_sample_dict(s) for s in samples[:max_error_samples]],
        "tail": {
            host: [clean_text(item[3]) for item in sorted(lines)[-tail_lines:]] if tail_lines > 0 else []
            for host, lines in sorted(tails.items(), key=lambda kv: natural_key(kv[0]))
        },
        "metrics": {
            name: {"last": v.last, "best": v.best, "goal": v.goal, "count": v.count}
            for name, v in sorted(metrics.items())
        },
    }


#: Prices for a summary: instance type -> price, or a function of the job's instance types (sorted, each once)
#: returning them (``HeteroTrainingHook.training_prices``: overrides, the cache, the Price List Query API).
Prices = Mapping[str, Price] | Callable[[list[str]], Mapping[str, Price]]
#: The seconds per datapoint of a series when no metrics query says otherwise.
DEFAULT_PERIOD = 60


@dataclass(frozen=True)
class SeriesSpec:
    """Asks for every group's utilisation series (``groups.<name>.series``) of ``points`` points each.

    ``axis`` is the metrics query's range in epoch seconds, so every group's series line up, and
    ``period`` its seconds per datapoint; without an axis (no training window, no hosts) the series
    are None, as they are when no datapoints were read. :func:`~airflow_hetero.logs.summarize.summarize_training_job`
    reads only ``points`` (the axis and period are those of the query it makes).
    """

    points: int = DEFAULT_SERIES_POINTS
    axis: tuple[float, float] | None = None
    period: int = DEFAULT_PERIOD

    def __post_init__(self) -> None:
        if isinstance(self.points, bool) or not isinstance(self.points, int) or self.points < 1:
            raise ValueError(f"SeriesSpec: points must be an integer of at least 1, got {self.points!r}")


@dataclass(frozen=True)
class VerdictSpec:
    """Asks for the verdict (``verdict``), judged with these thresholds (``Thresholds.of({...})`` from a
    partial mapping; the default: :class:`~airflow_hetero.logs.verdict.Thresholds`' own)."""

    thresholds: Thresholds = field(default_factory=Thresholds)


@dataclass(frozen=True)
class CostSpec:
    """Asks for the cost (``cost``) and the verdict's effects, with these prices (instance type ->
    :class:`~airflow_hetero.pricing.price_list.Price`, all in ``currency``), or a function of the job's
    instance types that returns them (called once, when the summary is built)."""

    prices: Prices
    currency: str = PRICE_LIST_CURRENCY

    def __post_init__(self) -> None:
        check_currency(self.currency)  # a bad one fails before anything is read

    def priced(self, instance_types: Iterable[str]) -> Mapping[str, Price]:
        """The prices of ``instance_types`` (the function's answer for them, sorted and each once)."""
        if callable(self.prices):
            return self.prices(sorted(set(instance_types)))
        return self.prices


@dataclass(frozen=True)
class _Options:
    """What every group's entry is built from, besides its own hosts and logs."""

    describe: Mapping[str, Any]
    mapping: HostMapping
    now: datetime | None
    window: tuple[float, float] | None
    datapoints: Mapping[str, Mapping[str, Iterable[Datapoint]]] | None
    clip_datapoints: bool
    tail_lines: int
    max_error_samples: int
    series: SeriesSpec | None
    capacity_overrides: Mapping[str, Capacity | Mapping[str, Any]] | None


def _group_entry(
    spec: GroupSpec | None,
    name: str,
    hosts: list[str],
    group_logs: Sequence[StreamLog],
    options: _Options,
) -> GroupSummary:
    """One group's part of the summary, in its documented key order."""
    count = spec.instance_count if spec else len(hosts)
    mapping, datapoints = options.mapping, options.datapoints
    instance_type = (spec.instance_type if spec else None) or mapping.instance_types.get(name)
    cap = capacity_of(instance_type, options.capacity_overrides)
    entry: GroupSummary = {
        "instance_type": instance_type,
        "instance_count": count,
        "devices": {"cpus": cap.cpus, "gpus": cap.gpus},
        "hosts": hosts,
        "mapped_by": {host: mapping.source[host] for host in hosts},
        **merge_logs(group_logs, options.tail_lines, options.max_error_samples),  # type: ignore[typeddict-item]
        "utilization": (
            per_device_utilization(
                aggregate_utilization(hosts, datapoints, options.window if options.clip_datapoints else None), cap
            )
            if datapoints is not None
            else None
        ),
        "instance_seconds": instance_seconds(count, options.describe, options.now) if options.describe else None,
    }
    saved = spot_saved_instance_seconds(count, options.describe) if options.describe else None
    if saved is not None:
        entry["spot_saved_instance_seconds"] = saved
    series = options.series
    if series is not None:
        entry["series"] = (
            per_device_series(group_series(hosts, datapoints, series.axis, series.points, series.period), cap)
            if datapoints and series.axis is not None
            else None
        )
    return entry


def build_summary(
    job_name: str,
    describe: Mapping[str, Any] | None,
    logs: Sequence[StreamLog],
    *,
    tail_lines: int = 20,
    max_error_samples: int = 10,
    datapoints: Mapping[str, Mapping[str, Iterable[Datapoint]]] | None = None,
    mapping: HostMapping | None = None,
    now: datetime | None = None,
    clip_datapoints: bool = True,
    read_problems: Sequence[str] = (),
    series: SeriesSpec | None = None,
    verdict: VerdictSpec | None = None,
    cost: CostSpec | None = None,
    api_calls: Mapping[str, int] | None = None,
    capacity_overrides: Mapping[str, Capacity | Mapping[str, Any]] | None = None,
) -> LogSummary:
    """The whole summary (before the size bound), built once, in its documented key order.

    ``datapoints`` None means metrics were not read; ``clip_datapoints=False`` takes them as
    already limited to the training window (by the query). ``read_problems`` (what reading the logs
    ran into) follow the mapping's problems. Given ``series``, ``verdict``, ``cost`` or ``api_calls``,
    the groups' series, the verdict, the cost (and the verdict's effects in money) and the reading
    cost are part of the summary; without them those keys are left out (a ``cost`` whose prices are a
    function is asked once, for the job's instance types). Utilisation and series are
    per device (:mod:`airflow_hetero.logs.capacity`; ``capacity_overrides``: instance type ->
    ``{"cpus", "gpus"}`` where the built-in rule is wrong for the hosts).
    """
    describe = describe or {}
    specs: list[GroupSpec] = instance_groups(describe)
    mapping = mapping or resolve_mapping(logs, specs)
    options = _Options(
        describe=describe,
        mapping=mapping,
        now=now,
        window=training_window(describe, now) if describe else None,
        datapoints=datapoints,
        clip_datapoints=clip_datapoints,
        tail_lines=tail_lines,
        max_error_samples=max_error_samples,
        series=series,
        capacity_overrides=capacity_overrides,
    )
    members: dict[str, list[str]] = {spec.name: [] for spec in specs}
    for host, group in mapping.host_to_group.items():
        members.setdefault(group, []).append(host)
    by_host: dict[str, list[StreamLog]] = {}
    for log in logs:
        by_host.setdefault(log.host, []).append(log)
    spec_of = {spec.name: spec for spec in specs}

    groups: dict[str, GroupSummary] = {}
    for name, members_of in members.items():
        hosts = sorted(members_of, key=natural_key)
        group_logs = [log for host in hosts for log in by_host.get(host, ())]
        groups[name] = _group_entry(spec_of.get(name), name, hosts, group_logs, options)

    unmapped_logs = [log for host in mapping.unmapped for log in by_host.get(host, ())]
    unmapped: UnmappedSection | None = None
    if mapping.unmapped:
        section: UnmappedSection = {
            "hosts": sorted(mapping.unmapped, key=natural_key),
            **merge_logs(unmapped_logs, tail_lines, max_error_samples),  # type: ignore[typeddict-item]
        }
        unmapped = section
    overview: JobOverview = job_overview(describe, now) if describe else {"status": None, "partial": True}
    summary: LogSummary = {
        "training_job_name": job_name,
        **overview,  # type: ignore[typeddict-item]
        "groups": groups,
        "unmapped_hosts": sorted(mapping.unmapped, key=natural_key),
        "unmapped": unmapped,
        "problems": [*mapping.problems, *read_problems],
        "errors": sum(log.errors for log in logs),
        "warnings": sum(log.warnings for log in logs),
        "truncated": {},
    }
    prices = cost.priced(spec.instance_type for spec in specs if spec.instance_type) if cost else None
    if verdict is not None:
        summary["verdict"] = judge_groups(
            groups,
            partial=summary["partial"],
            thresholds=verdict.thresholds,
            prices=prices,
            currency=cost.currency if cost else PRICE_LIST_CURRENCY,
        )
    if cost is not None and prices is not None:
        judged = summary.get("verdict")
        summary["cost"] = job_cost(
            groups,
            judged if judged and "groups" in judged else None,
            prices,
            currency=cost.currency,
            describe=describe,
            partial=summary["partial"],
        )
    if api_calls is not None:
        summary["api_calls"] = dict(api_calls)
    cleaned: LogSummary = clean_values(summary)
    return cleaned
