"""Bound a summary's size as XCom stores it (JSON), cutting in a fixed order (pure).

The size bound cuts in a fixed order: utilisation series beyond a third of the bound first (halved,
never below a few points), then tails (long lines, then fewer lines per host), then error samples
(long lines, then fewer samples), then the timeline's messages, the problem list and the unmapped
host list, then the series themselves and the verdict's details, then the per-host lists of every
group (hosts, streams, mapping sources, tails) down to a few entries each, and at the very end
everything but the job's status and counts. Any number of hosts and streams fits;
``summary["truncated"]`` says what was cut; nothing is cut silently, and no summary is refused for
its size.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

#: Default bound: well under common XCom backends' limits (the DB backend stores tens of KB happily).
DEFAULT_MAX_XCOM_BYTES = 48 * 1024
#: Smallest bound accepted: the skeleton (groups, counters, metrics) must fit.
MIN_MAX_XCOM_BYTES = 2048


def json_size(value: Any) -> int:
    """Bytes of ``value`` as JSON, the way Airflow's XCom encoder writes it (ASCII escapes)."""
    return len(json.dumps(value, default=str))


def _sections(summary: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The group dicts and the unmapped-host section: everything that has tails and samples."""
    yield from summary.get("groups", {}).values()
    if summary.get("unmapped"):
        yield summary["unmapped"]


def _cut_line(line: str, chars: int) -> str:
    return line if len(line) <= chars else f"{line[:chars]}... [cut]"


def _shrink_tails(summary: dict[str, Any], lines: int, chars: int) -> int:
    """Keep the last ``lines`` lines per host, each at most ``chars`` long; return lines dropped."""
    dropped = 0
    for section in _sections(summary):
        for host, tail in section.get("tail", {}).items():
            keep = tail[-lines:] if lines > 0 else []
            dropped += len(tail) - len(keep)
            section["tail"][host] = [_cut_line(line, chars) for line in keep]
    return dropped


def _shrink_samples(summary: dict[str, Any], count: int, chars: int) -> int:
    """Keep the first ``count`` error samples per group, lines at most ``chars``; return samples dropped."""
    dropped = 0
    for section in _sections(summary):
        samples = section.get("error_samples", [])
        keep = samples[:count]
        dropped += len(samples) - len(keep)
        for sample in keep:
            sample["line"] = _cut_line(sample["line"], chars)
            if "exception" in sample:
                sample["exception"] = _cut_line(sample["exception"], chars)
        section["error_samples"] = keep
    return dropped


def _series_size(summary: dict[str, Any]) -> int:
    return sum(json_size(g.get("series")) for g in summary.get("groups", {}).values() if g.get("series"))


def _shrink_series(summary: dict[str, Any], truncated: dict[str, Any], done: Callable[[], bool], *, drop: bool) -> bool:
    """Halve every group's series until ``done()`` (not below
    :data:`airflow_hetero.logs.series.MIN_SERIES_POINTS`; with ``drop`` the series go when that is
    not enough). Returns ``done()``."""
    from airflow_hetero.logs.series import MIN_SERIES_POINTS, halve  # only when there is something to cut

    groups = [g for g in summary.get("groups", {}).values() if g.get("series")]
    while groups and not done():
        if all(int(g["series"]["points"]) <= MIN_SERIES_POINTS for g in groups):
            if not drop:
                break
            for group in groups:
                group["series"] = None
            truncated["series"] = {"dropped": True}
            break
        for group in groups:
            if int(group["series"]["points"]) > MIN_SERIES_POINTS:
                group["series"] = halve(group["series"])
        truncated["series"] = {"points_per_group": max(int(g["series"]["points"]) for g in groups)}
    return done()


def _steps(start: int) -> list[int]:
    """start, start/2, start/4, ..., 1, 0."""
    out, value = [], start
    while value > 1:
        value //= 2
        out.append(max(value, 1))
    return [*dict.fromkeys(out), 0]


def enforce_size_limit(summary: dict[str, Any], max_bytes: int = DEFAULT_MAX_XCOM_BYTES) -> dict[str, Any]:
    """A copy of ``summary`` whose JSON is at most ``max_bytes``, with ``truncated`` saying what was cut.

    Raises ValueError only when ``max_bytes`` is below :data:`MIN_MAX_XCOM_BYTES`; any summary fits.
    """
    if max_bytes < MIN_MAX_XCOM_BYTES:
        raise ValueError(f"max_xcom_bytes must be at least {MIN_MAX_XCOM_BYTES}, got {max_bytes}")
    before = json_size(summary)
    if before <= max_bytes:
        return summary
    out = copy.deepcopy(summary)
    truncated: dict[str, Any] = {"bytes_before": before, "max_xcom_bytes": max_bytes}
    out["truncated"] = truncated

    def fits() -> bool:
        for _ in range(3):  # bytes_after counts its own digits: settle the number
            size = json_size(out)
            if truncated.get("bytes_after") == size:
                break
            truncated["bytes_after"] = size
        return int(truncated["bytes_after"]) <= max_bytes

    if _shrink_series(out, truncated, lambda: _series_size(out) <= max_bytes // 3, drop=False) and fits():
        return out
    most_tail = max((len(t) for s in _sections(out) for t in s.get("tail", {}).values()), default=0)
    most_samples = max((len(s.get("error_samples", [])) for s in _sections(out)), default=0)
    tail_dropped = 0
    for lines, chars in [(most_tail, 300), *((n, 200) for n in _steps(most_tail))]:
        tail_dropped += _shrink_tails(out, lines, chars)
        truncated["tail"] = {"lines_per_host": lines, "line_chars": chars, "lines_dropped": tail_dropped}
        if fits():
            return out
    samples_dropped = 0
    for count, chars in [(most_samples, 300), *((n, 160) for n in _steps(most_samples))]:
        samples_dropped += _shrink_samples(out, count, chars)
        truncated["error_samples"] = {"per_group": count, "line_chars": chars, "dropped": samples_dropped}
        if fits():
            return out
    other: list[str] = []
    truncated["other"] = other
    for item in out.get("timeline") or ():
        item["message"] = None
    other.append("timeline messages")
    if fits():
        return out
    if len(out.get("problems") or ()) > 3:
        other.append(f"problems ({len(out['problems']) - 3} of {len(out['problems'])} dropped)")
        out["problems_total"] = len(out["problems"])
        out["problems"] = out["problems"][:3]
        if fits():
            return out
    for key in ("unmapped_hosts",):
        hosts = out.get(key) or []
        if len(hosts) > 10:
            other.append(f"{key} ({len(hosts) - 10} of {len(hosts)} dropped)")
            out[f"{key}_total"] = len(hosts)
            out[key] = hosts[:10]
            if out.get("unmapped"):
                out["unmapped"]["hosts"] = hosts[:10]
            if fits():
                return out
    if _shrink_series(out, truncated, fits, drop=True):
        return out
    if isinstance(out.get("verdict"), dict) and out["verdict"].get("groups"):
        headline = ("kind", "bottleneck", "message", "suggestion", "waiting_share")
        out["verdict"] = {key: out["verdict"][key] for key in headline if out["verdict"].get(key) is not None}
        other.append("verdict details (per group, notes, thresholds)")
        if fits():
            return out
    for keep in (64, 16, 4, 1, 0):
        cut = _cut_host_lists(out, keep)
        if cut:
            other.append(f"{len(cut)} per-host lists cut to {keep} entries (each list's full length in <key>_total)")
        if fits():
            return out
    return _skeleton(out, truncated)


#: Lists and mappings of a section that grow with the number of hosts and streams.
_HOST_KEYS = ("hosts", "log_streams", "mapped_by", "tail")


def _cut_host_lists(summary: dict[str, Any], keep: int) -> list[str]:
    """Keep the first ``keep`` entries of every per-host list; ``name (dropped of total)`` for each cut."""
    cut: list[str] = []
    named = [*summary.get("groups", {}).items()]
    if summary.get("unmapped"):
        named.append(("(unmapped)", summary["unmapped"]))
    for name, section in named:
        for key in _HOST_KEYS:
            value = section.get(key)
            if isinstance(value, list | dict) and len(value) > keep:
                total = section.setdefault(f"{key}_total", len(value))  # the length before any cut
                section[key] = value[:keep] if isinstance(value, list) else dict(list(value.items())[:keep])
                cut.append(f"{name}.{key} ({total - keep} of {total})")
    for key in ("unmapped_hosts", "problems"):
        value = summary.get(key)
        if isinstance(value, list) and len(value) > keep:
            total = summary.setdefault(f"{key}_total", len(value))
            cut.append(f"{key} ({total - keep} of {total})")
            summary[key] = value[:keep]
    return cut


def _skeleton(summary: dict[str, Any], truncated: dict[str, Any]) -> dict[str, Any]:
    """The job's status and counts only: what is left when even the cut summary is too big."""
    keys = ("training_job_name", "status", "secondary_status", "partial", "errors", "warnings")
    out: dict[str, Any] = {key: summary.get(key) for key in keys}
    out["failure_reason"] = str(summary.get("failure_reason") or "")[:300] or None
    out["groups"] = {
        str(name)[:64]: {"instance_count": g.get("instance_count"), "errors": g.get("errors")}
        for name, g in list(summary.get("groups", {}).items())[:5]
    }
    truncated["other"] = [*truncated.get("other", [])[-3:], "everything but the job's status and counts"]
    out["truncated"] = truncated
    for _ in range(3):  # bytes_after counts its own digits
        truncated["bytes_after"] = json_size(out)
    return out
