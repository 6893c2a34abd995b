"""SageMaker's summed percentages turned into 0-100 per device, once, for the whole summary (pure).

SageMaker reports ``CPUUtilization`` and ``GPUUtilization`` / ``GPUMemoryUtilization`` summed over
the instance's CPUs or GPUs (an 8-GPU host at full load reports 800). The summary states one figure
per device everywhere (table, verdict, view, XCom): :func:`per_device_utilization` and
:func:`per_device_series` divide by the device count when the summary is built, and each stat says
its ``unit``. The vCPUs and GPUs of an instance type are SageMaker's facts
(:func:`airflow_hetero.sagemaker_facts.capacity`); anything unknown is None (the figure stays summed and its
unit says so), and callers may pass their own figures (``capacity_overrides``, :func:`capacity_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_hetero.sagemaker_facts import Capacity, capacity

if TYPE_CHECKING:
    from airflow_hetero.logs.shape import Series, SeriesLine, Utilization, UtilizationStat


def capacity_of(instance_type: str | None, overrides: Mapping[str, Capacity | Mapping[str, Any]] | None) -> Capacity:
    """``overrides``' figures for ``instance_type`` (``{"cpus": n, "gpus": n}``), else :func:`capacity`."""
    given = (overrides or {}).get(instance_type or "")
    if given is None:
        return capacity(instance_type)
    if isinstance(given, Capacity):
        return given
    return Capacity(given.get("cpus"), given.get("gpus"))


#: Metrics SageMaker sums over devices: key -> (the :class:`Capacity` field, the devices' name).
SUMMED = {"cpu": ("cpus", "vCPUs"), "gpu": ("gpus", "GPUs"), "gpu_memory": ("gpus", "GPUs' memory")}
#: The unit of the metrics that are a share of one thing already.
_WHOLE = {"memory": "% of memory", "disk": "% of disk"}


def devices_of(key: str, cap: Capacity) -> int | None:
    """The count ``key``'s figure is divided by: its devices, 1 for memory and disk, None when unknown."""
    if key not in SUMMED:
        return 1
    return cap.cpus if SUMMED[key][0] == "cpus" else cap.gpus


def unit_of(key: str, cap: Capacity) -> str:
    """How ``key``'s figure is stated: ``% of all vCPUs`` (the average vCPU), or summed when the count
    is unknown."""
    if key not in SUMMED:
        return _WHOLE.get(key, "%")
    what, devices = SUMMED[key][1], devices_of(key, cap)
    if devices:
        return f"% of all {what}"
    why = "count unknown" if devices is None else "the type has none known"
    return f"% summed over {what} ({why}: 100 per device)"


def _divided(value: Any, devices: int | None) -> Any:
    return round(float(value) / devices, 2) if value is not None and devices else value


def per_device_utilization(utilization: Utilization | None, cap: Capacity) -> Utilization | None:
    """SageMaker's figures (:func:`airflow_hetero.logs.per_group.aggregate_utilization`) per device, each
    stat with its ``unit``; the one place the summary divides."""
    from airflow_hetero.logs.shape import UTILIZATION_METRICS  # when a summary is built, not at DAG parse

    if utilization is None:
        return None
    out = utilization.copy()
    for key in UTILIZATION_METRICS.values():
        stat = utilization[key]
        if stat is not None:
            out[key] = _stat_per_device(stat, devices_of(key, cap), unit_of(key, cap))
    return out


def _stat_per_device(stat: UtilizationStat, devices: int | None, unit: str) -> UtilizationStat:
    entry = stat.copy()
    entry["avg"], entry["max"] = _divided(stat["avg"], devices), _divided(stat["max"], devices)
    entry["unit"] = unit
    return entry


def per_device_series(series: Series | None, cap: Capacity) -> Series | None:
    """A group's series (:func:`airflow_hetero.logs.series.group_series`) in the same units as its
    utilisation."""
    from airflow_hetero.logs.shape import UTILIZATION_METRICS  # when a summary is built, not at DAG parse

    if series is None:
        return None
    out = series.copy()
    for key in UTILIZATION_METRICS.values():
        line = series.get(key)
        devices = devices_of(key, cap)
        if line and devices and key in SUMMED:
            divided: SeriesLine = {
                "avg": [_divided(v, devices) for v in line["avg"]],
                "max": [_divided(v, devices) for v in line["max"]],
            }
            out[key] = divided
    return out
