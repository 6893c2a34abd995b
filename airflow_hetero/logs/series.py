"""Per-group utilisation time series, downsampled to a few dozen points so they fit in XCom (pure).

From the per-host CloudWatch datapoints (host -> metric -> (epoch seconds, average, maximum)) a
group's series puts the training window into ``points`` equal buckets (never finer than the
metrics query's period) and keeps, per bucket, the mean of the hosts' averages and the largest
maximum. Metrics without datapoints are left out. Values are SageMaker's own percentages (CPU and
GPU summed over the instance's devices). The shape is compact and self-describing::

    {"start": "2026-11-30T05:04:00.000Z", "start_epoch": 1796015040.0, "step_seconds": 60,
     "points": 10, "cpu": {"avg": [12.5, ...], "max": [20, ...]}, "gpu": {...}}

Empty buckets are ``null``. :func:`halve` merges neighbouring buckets when the size bound in
:mod:`airflow_hetero.logs.size_limit` needs room.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from airflow_hetero.logs.shape import UTILIZATION_METRICS, Datapoint, Series, SeriesKey, SeriesLine
from airflow_hetero.logs.text import iso

#: Everything SageMaker publishes per training host: CloudWatch metric name -> series key.
SERIES_METRICS: dict[str, SeriesKey] = {**UTILIZATION_METRICS, "DiskUtilization": "disk"}
#: Points per series by default: one every 1-2 % of the training window.
DEFAULT_SERIES_POINTS = 60
#: Fewest points a series is cut to before it is dropped (see :func:`halve`).
MIN_SERIES_POINTS = 4


def _value(value: float | None) -> float | int | None:
    """One decimal, and whole numbers without ``.0`` (bytes count: this is XCom)."""
    if value is None:
        return None
    rounded = round(float(value), 1)
    return int(rounded) if rounded.is_integer() else rounded


def group_series(
    hosts: Iterable[str],
    datapoints: Mapping[str, Mapping[str, Iterable[Datapoint]]],
    window: tuple[float, float] | None = None,
    points: int = DEFAULT_SERIES_POINTS,
    period: int = 60,
) -> Series | None:
    """The downsampled series of one group's hosts; None when no host has any datapoint.

    Buckets are never narrower than ``period``, the seconds per datapoint of the metrics query.
    ``window`` (epoch seconds) fixes the time axis so every group's series line up; without it the
    axis spans the datapoints. Datapoints outside the window go to its first or last bucket.
    """
    if points < 1:
        raise ValueError(f"points must be at least 1, got {points}")
    host_list = list(hosts)
    samples: dict[SeriesKey, list[Datapoint]] = {}
    for metric, key in SERIES_METRICS.items():
        found = [p for host in host_list for p in datapoints.get(host, {}).get(metric, ())]
        if found:
            samples[key] = found
    if not samples:
        return None
    stamps = [p[0] for found in samples.values() for p in found]
    start, end = window if window is not None else (min(stamps), max(stamps))
    start = math.floor(min(start, end))
    span = max(end - start, 1.0)
    step = max(math.ceil(span / points), period, 1)
    count = max(1, min(points, math.ceil(span / step)))
    out: Series = {
        "start": iso(start * 1000),
        "start_epoch": float(start),
        "step_seconds": step,
        "points": count,
    }
    for key, found in samples.items():
        sums = [0.0] * count
        seen = [0] * count
        tops: list[float | None] = [None] * count
        for stamp, average, maximum in found:
            slot = min(max(int((stamp - start) // step), 0), count - 1)
            if average is not None:
                sums[slot] += average
                seen[slot] += 1
            top = maximum if maximum is not None else average
            if top is not None:
                previous = tops[slot]
                tops[slot] = top if previous is None else max(previous, top)
        out[key] = {
            "avg": [_value(sums[i] / seen[i]) if seen[i] else None for i in range(count)],
            "max": [_value(top) for top in tops],
        }
    return out


def halve(series: Series) -> Series:
    """The same series with neighbouring buckets merged (mean of averages, largest maximum)."""
    count = int(series["points"])
    if count <= 1:
        return series
    merged = (count + 1) // 2
    out = series.copy()
    out["step_seconds"], out["points"] = int(series["step_seconds"]) * 2, merged
    for key in SERIES_METRICS.values():
        values = series.get(key)
        if not values:
            continue
        averages, tops = values["avg"], values["max"]
        new_avg: list[float | int | None] = []
        new_max: list[float | int | None] = []
        for i in range(0, count, 2):
            pair = [v for v in averages[i : i + 2] if v is not None]
            new_avg.append(_value(sum(pair) / len(pair)) if pair else None)
            peaks = [v for v in tops[i : i + 2] if v is not None]
            new_max.append(max(peaks) if peaks else None)
        line: SeriesLine = {"avg": new_avg, "max": new_max}
        out[key] = line
    return out


def keys_of(series: Series | None) -> list[SeriesKey]:
    """The metric keys a series holds, in :data:`SERIES_METRICS` order."""
    if not series:
        return []
    return [key for key in SERIES_METRICS.values() if series.get(key)]
