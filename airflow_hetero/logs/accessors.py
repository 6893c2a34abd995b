"""Typed reads of a log summary as XCom holds it: no casts, each part checked before it is typed (pure).

A summary read back from XCom is plain JSON: this version's, an older one's, the size bound's
skeleton, or a dict a task made by hand. Its readers (the summary operator, the CLI, the demo, the
table and report, the "Instance groups" page) take its parts through these accessors. Each checks
the part it returns just enough to be honest about its type (:mod:`airflow_hetero.logs.shape`): the
keys the type requires are there, and every key present holds a value of the declared kind. A part
that is missing or malformed reads as ``None`` (or empty), so no reader crashes on it later.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeGuard

from airflow_hetero.logs.series import SERIES_METRICS
from airflow_hetero.logs.shape import UTILIZATION_METRICS

if TYPE_CHECKING:
    from airflow_hetero.logs.shape import (
        CapacityAttempt,
        Cost,
        CostHeadline,
        Devices,
        ErrorSampleEntry,
        LogSummary,
        MetricSummary,
        QueueAttempts,
        Series,
        Truncated,
        Utilization,
        Verdict,
        VerdictHeadline,
    )

__all__ = [
    "capacity_attempts_of",
    "cost_of",
    "device_counts_of",
    "error_samples_of",
    "groups_of",
    "hosts_of",
    "is_log_summary",
    "is_skeleton",
    "metrics_of",
    "problems_of",
    "queue_attempts_of",
    "series_of",
    "truncated_of",
    "unmapped_of",
    "utilization_of",
    "verdict_of",
]

#: A check of one JSON value.
Check = Callable[[object], bool]


def _kind(*kinds: type) -> Check:
    """Instances of ``kinds``; a bool is not taken for a number."""
    return lambda value: isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


_STR, _INT, _NUM, _BOOL = _kind(str), _kind(int), _kind(int, float), _kind(bool)


def _or_none(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list) and all(check(item) for item in value)


def _dict_of(check: Check) -> Check:
    return lambda value: isinstance(value, dict) and all(isinstance(k, str) and check(v) for k, v in value.items())


def _shape(required: Mapping[str, Check], optional: Mapping[str, Check] | None = None) -> Check:
    """A dict holding every ``required`` key, each present key's value passing its check."""

    def check(value: object) -> bool:
        if not isinstance(value, dict):
            return False
        if any(key not in value or not test(value[key]) for key, test in required.items()):
            return False
        return all(test(value[key]) for key, test in (optional or {}).items() if key in value)

    return check


def _without(key: str, check: Check) -> Check:
    """``check``, for a headline: the ``@final`` shape that tells itself from the whole by ``key``'s absence."""
    return lambda value: isinstance(value, dict) and key not in value and check(value)


_EFFECT = _shape(
    {
        "instance_count": _INT,
        "suggested_count": _INT,
        "currency": _STR,
        "per_hour": _or_none(_NUM),
        "per_run": _or_none(_NUM),
        "assumption": _STR,
    },
    {"run_seconds": _NUM, "run_seconds_after": _NUM, "reason": _STR},
)
_SUGGESTION = _shape({"group": _STR, "instance_count": _INT}, {"effect": _EFFECT})
_GROUP_VERDICT = _shape(
    {"state": _STR},
    {
        "resource": _STR,
        **dict.fromkeys(("busy_percent", "peak_percent", "instance_seconds", "waiting_share"), _NUM),
        **dict.fromkeys(("waiting_instance_seconds", "memory_percent", "disk_percent"), _NUM),
        "spot_saved_instance_seconds": _NUM,
        **dict.fromkeys(("instance_count", "cpus", "gpus", "suggested_count"), _INT),
        "over_provisioned": _BOOL,
        "effect": _EFFECT,
    },
)
_VERDICT = _shape(
    {
        "kind": _STR,
        "bottleneck": _or_none(_STR),
        "message": _STR,
        "suggestion": _or_none(_SUGGESTION),
        "groups": _dict_of(_GROUP_VERDICT),
        "idle_groups": _list_of(_STR),
        "over_provisioned_groups": _list_of(_STR),
        "notes": _list_of(_STR),
        "thresholds": _dict_of(_NUM),
        **dict.fromkeys(("instance_seconds", "waiting_instance_seconds", "waiting_share"), _or_none(_NUM)),
    }
)
_VERDICT_HEADLINE = _without(
    "groups",
    _shape({}, {"kind": _STR, "bottleneck": _STR, "message": _STR, "suggestion": _SUGGESTION, "waiting_share": _NUM}),
)

_GROUP_COST = _shape(
    {
        "instance_type": _or_none(_STR),
        "instance_count": _INT,
        **dict.fromkeys(("instance_seconds", "price_per_hour", "cost"), _or_none(_NUM)),
        **dict.fromkeys(("waiting_instance_seconds", "waiting_cost"), _or_none(_NUM)),
    },
    {"reason": _STR, "spot_saving": _NUM},
)
_PRICE = _shape({"per_hour": _or_none(_NUM), "currency": _STR}, {"source": _STR, "description": _STR})
_SPOT = _shape({"billable_seconds": _or_none(_INT), "training_seconds": _or_none(_INT), "ratio": _or_none(_NUM)})
_COST = _shape(
    {
        "currency": _STR,
        "total": _or_none(_NUM),
        "waiting": _or_none(_NUM),
        "groups": _dict_of(_GROUP_COST),
        "prices": _dict_of(_PRICE),
        "estimate": _BOOL,
        "spot": _or_none(_SPOT),
        "notes": _list_of(_STR),
    },
    {"spot_saving": _NUM},
)
_COST_HEADLINE = _without("groups", _shape({"currency": _STR}, {"total": _or_none(_NUM), "waiting": _or_none(_NUM)}))

_STAT = _shape({"avg": _or_none(_NUM), "max": _or_none(_NUM), "hosts": _INT, "datapoints": _INT}, {"unit": _STR})
_UTILIZATION = _shape(dict.fromkeys(UTILIZATION_METRICS.values(), _or_none(_STAT)))
_SERIES_LINE = _shape(dict.fromkeys(("avg", "max"), _list_of(_or_none(_NUM))))
_SERIES = _shape(
    {"start": _or_none(_STR), "start_epoch": _NUM, "step_seconds": _INT, "points": _INT},
    dict.fromkeys(SERIES_METRICS.values(), _SERIES_LINE),
)
_SAMPLE = _shape({"host": _STR, "time": _or_none(_STR), "line": _STR}, {"exception": _STR})
_METRIC = _shape({"last": _NUM, "best": _NUM, "goal": _STR, "count": _INT})
_DEVICES = _shape(dict.fromkeys(("cpus", "gpus"), _or_none(_INT)))
_LOG_PART = {
    "log_streams": _list_of(_STR),
    **dict.fromkeys(("events", "bytes", "errors", "warnings"), _INT),
    **dict.fromkeys(("first_event", "last_event"), _or_none(_STR)),
    "error_samples": _list_of(_SAMPLE),
    "tail": _dict_of(_list_of(_STR)),
    "metrics": _dict_of(_METRIC),
}
_HOST_LIST_TOTALS = dict.fromkeys(("hosts_total", "log_streams_total", "mapped_by_total", "tail_total"), _INT)
_GROUP = _shape(
    {
        "instance_type": _or_none(_STR),
        "instance_count": _INT,
        "hosts": _list_of(_STR),
        "mapped_by": _dict_of(_STR),
        **_LOG_PART,
        "utilization": _or_none(_UTILIZATION),
        "instance_seconds": _or_none(_NUM),
    },
    {"devices": _DEVICES, "series": _or_none(_SERIES), "spot_saved_instance_seconds": _NUM, **_HOST_LIST_TOTALS},
)
_UNMAPPED = _shape({"hosts": _list_of(_STR), **_LOG_PART}, _HOST_LIST_TOTALS)
_SKELETON_GROUP = _shape(dict.fromkeys(("instance_count", "errors"), _or_none(_INT)))
_CUT = _dict_of(_kind(int, bool))
_TRUNCATED = _shape(
    {},
    {
        **dict.fromkeys(("bytes_before", "max_xcom_bytes", "bytes_after"), _INT),
        **dict.fromkeys(("series", "tail", "error_samples"), _CUT),
        "other": _list_of(_STR),
    },
)
_STEP = _shape(
    {
        **dict.fromkeys(("status", "start", "end", "message"), _or_none(_STR)),
        "seconds": _or_none(_NUM),
        "ongoing": _BOOL,
    }
)
_WINDOW = _shape({"start": _or_none(_STR), "end": _or_none(_STR), "seconds": _NUM})
_ATTEMPT = _shape(
    {
        "job_name": _or_none(_STR),
        "instance_groups": _list_of(_shape({"name": _STR, "type": _STR, "count": _INT})),
        "reason": _STR,
    }
)
_QUEUE_ATTEMPT = _shape(
    {"training_job": _STR, "status": _or_none(_STR), **dict.fromkeys(("billable_seconds", "cost"), _or_none(_NUM))},
    {"reason": _STR},
)
_QUEUE = _shape(
    {
        **dict.fromkeys(("service_job", "job_id", "currency"), _STR),
        "job_queue": _or_none(_STR),
        "attempts": _list_of(_QUEUE_ATTEMPT),
        **dict.fromkeys(("earlier_cost", "total"), _or_none(_NUM)),
    }
)
_SUMMARY = _shape(
    {
        "training_job_name": _STR,
        "status": _or_none(_STR),
        "partial": _BOOL,
        "groups": _dict_of(_GROUP),
        "unmapped_hosts": _list_of(_STR),
        "unmapped": _or_none(_UNMAPPED),
        "problems": _list_of(_STR),
        **dict.fromkeys(("errors", "warnings"), _INT),
        "truncated": _TRUNCATED,
    },
    {
        **dict.fromkeys(("secondary_status", "failure_reason"), _or_none(_STR)),
        "timeline": _list_of(_STEP),
        **dict.fromkeys(("billable_seconds", "training_seconds"), _or_none(_INT)),
        "training_window": _or_none(_WINDOW),
        "verdict": lambda value: _VERDICT(value) or _VERDICT_HEADLINE(value),
        "cost": lambda value: _COST(value) or _COST_HEADLINE(value),
        "api_calls": _dict_of(_INT),
        "capacity_attempts": _list_of(_ATTEMPT),
        "queue_attempts": _QUEUE,
        **dict.fromkeys(("problems_total", "unmapped_hosts_total"), _INT),
    },
)


def is_log_summary(value: object) -> TypeGuard[LogSummary]:
    """Whether ``value`` is a whole :class:`~airflow_hetero.logs.shape.LogSummary`, every part of it checked."""
    return _SUMMARY(value)


def _is_verdict(value: object) -> TypeGuard[Verdict]:
    return _VERDICT(value)


def _is_verdict_headline(value: object) -> TypeGuard[VerdictHeadline]:
    return _VERDICT_HEADLINE(value)


def _is_cost(value: object) -> TypeGuard[Cost]:
    return _COST(value)


def _is_cost_headline(value: object) -> TypeGuard[CostHeadline]:
    return _COST_HEADLINE(value)


def _is_attempt(value: object) -> TypeGuard[CapacityAttempt]:
    return _ATTEMPT(value)


def _is_queue(value: object) -> TypeGuard[QueueAttempts]:
    return _QUEUE(value)


def _is_utilization(value: object) -> TypeGuard[Utilization]:
    return _UTILIZATION(value)


def _is_series(value: object) -> TypeGuard[Series]:
    return _SERIES(value)


def _is_sample(value: object) -> TypeGuard[ErrorSampleEntry]:
    return _SAMPLE(value)


def _is_metric(value: object) -> TypeGuard[MetricSummary]:
    return _METRIC(value)


def _is_devices(value: object) -> TypeGuard[Devices]:
    return _DEVICES(value)


def _is_truncated(value: object) -> TypeGuard[Truncated]:
    return _TRUNCATED(value)


def verdict_of(summary: Mapping[str, object]) -> Verdict | VerdictHeadline | None:
    """The summary's verdict, or its headline once the size bound cut it (``"groups" in`` tells them
    apart); None when it has none (a skeleton, an older summary) or one of another shape."""
    verdict = summary.get("verdict")
    if _is_verdict(verdict) or _is_verdict_headline(verdict):
        return verdict
    return None


def cost_of(summary: Mapping[str, object]) -> Cost | CostHeadline | None:
    """What the job cost, or its headline (currency, total, waiting) once cut; None without one."""
    cost = summary.get("cost")
    if _is_cost(cost) or _is_cost_headline(cost):
        return cost
    return None


def capacity_attempts_of(summary: Mapping[str, object]) -> list[CapacityAttempt]:
    """The clusters that failed for lack of capacity before the job that ran, oldest first; [] when
    the job ran on its first cluster (or the summary does not say). Unreadable ones left out."""
    attempts = summary.get("capacity_attempts")
    return [a for a in attempts if _is_attempt(a)] if isinstance(attempts, list) else []


def queue_attempts_of(summary: Mapping[str, object]) -> QueueAttempts | None:
    """The service job a queued job ran in and every attempt's cost; None when the job was not queued
    (or the summary does not say, or says it in another shape)."""
    queue = summary.get("queue_attempts")
    return queue if _is_queue(queue) else None


def groups_of(summary: Mapping[str, object]) -> dict[str, Mapping[str, object]]:
    """The instance groups by name, each as the mapping it is ({} without groups).

    A group is a :class:`~airflow_hetero.logs.shape.GroupSummary`, a skeleton's
    :class:`~airflow_hetero.logs.shape.SkeletonGroup` or an older version's: read its parts with
    the accessors below (:func:`utilization_of`, :func:`series_of`, ...), so that a group missing
    one part still shows the others.
    """
    groups = summary.get("groups")
    if not isinstance(groups, dict):
        return {}
    return {str(name): group for name, group in groups.items() if isinstance(group, dict)}


def unmapped_of(summary: Mapping[str, object]) -> Mapping[str, object] | None:
    """The hosts no evidence maps to a group, with their logs (an
    :class:`~airflow_hetero.logs.shape.UnmappedSection`, read like a group); None when there are none."""
    unmapped = summary.get("unmapped")
    return unmapped if isinstance(unmapped, dict) and unmapped else None


def is_skeleton(summary: Mapping[str, object]) -> bool:
    """Whether this is the size bound's last resort (status and counts only): it has no ``unmapped``."""
    return "unmapped" not in summary


def problems_of(summary: Mapping[str, object]) -> list[str]:
    """What went wrong while reading (the mapping's and the readers' problems); [] without."""
    problems = summary.get("problems")
    return [str(p) for p in problems] if isinstance(problems, list) else []


def truncated_of(summary: Mapping[str, object]) -> Truncated:
    """What the size bound cut ({} when nothing was, or when the record is not readable)."""
    truncated = summary.get("truncated")
    return truncated if _is_truncated(truncated) else {}


def hosts_of(section: Mapping[str, object]) -> list[str]:
    """A group's (or the unmapped section's) hosts; [] without."""
    hosts = section.get("hosts")
    return [str(h) for h in hosts] if isinstance(hosts, list) else []


def utilization_of(section: Mapping[str, object]) -> Utilization | None:
    """A group's utilisation (None: not read, or not readable)."""
    utilization = section.get("utilization")
    return utilization if _is_utilization(utilization) else None


def series_of(section: Mapping[str, object]) -> Series | None:
    """A group's utilisation series (None: not read, none published, or dropped by the size bound)."""
    series = section.get("series")
    return series if _is_series(series) else None


def device_counts_of(section: Mapping[str, object]) -> Devices | None:
    """The vCPUs and GPUs per instance the group's figures were divided by; None when not stated."""
    devices = section.get("devices")
    return devices if _is_devices(devices) else None


def metrics_of(section: Mapping[str, object]) -> dict[str, MetricSummary]:
    """A group's MetricDefinition values by name; unreadable ones left out."""
    metrics = section.get("metrics")
    if not isinstance(metrics, dict):
        return {}
    return {str(name): value for name, value in metrics.items() if _is_metric(value)}


def error_samples_of(section: Mapping[str, object]) -> list[ErrorSampleEntry]:
    """A group's (or the unmapped section's) first error lines; unreadable ones left out."""
    samples = section.get("error_samples")
    return [s for s in samples if _is_sample(s)] if isinstance(samples, list) else []
