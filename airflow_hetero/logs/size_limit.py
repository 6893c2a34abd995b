"""Bound a summary's size as XCom stores it (JSON), cutting in a fixed order (pure).

The order is :data:`CUTTING_ORDER`, a table that :func:`enforce_size_limit` walks until the JSON
fits: utilisation series beyond a third of the bound first (halved, never below a few points), then
tails (long lines, then fewer lines per host), then error samples (long lines, then fewer samples),
then the timeline's messages, the problem list and the unmapped host list, then the series
themselves and the verdict's details, then the per-host lists of every group (hosts, streams,
mapping sources, tails) down to a few entries each, and at the very end everything but the job's
status and counts (:class:`~airflow_hetero.logs.shape.SummarySkeleton`). Any number of hosts and
streams fits; ``summary["truncated"]`` says what was cut; nothing is cut silently, and no summary
is refused for its size.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from airflow_hetero.logs.shape import BoundedSummary, LogSummary, SummarySkeleton, Truncated


__all__ = ["CUTTING_ORDER", "DEFAULT_MAX_XCOM_BYTES", "MIN_MAX_XCOM_BYTES", "Cut", "enforce_size_limit", "json_size"]

#: Default bound: well under common XCom backends' limits (the DB backend stores tens of KB happily).
DEFAULT_MAX_XCOM_BYTES = 48 * 1024
#: Smallest bound accepted: the skeleton (groups, counters, metrics) must fit.
MIN_MAX_XCOM_BYTES = 2048


def json_size(value: Any) -> int:
    """Bytes of ``value`` as JSON, the way Airflow's XCom encoder writes it (ASCII escapes)."""
    return len(json.dumps(value, default=str))


@dataclass
class _Cutting:
    """The copy being cut (a plain JSON tree: the cuts reach into it by key), its bound and its notes."""

    out: dict[str, Any]
    max_bytes: int
    bytes_before: int
    truncated: Truncated = field(init=False)

    def __post_init__(self) -> None:
        self.truncated = {"bytes_before": self.bytes_before, "max_xcom_bytes": self.max_bytes}
        self.out["truncated"] = self.truncated

    def fits(self) -> bool:
        """Whether the copy fits now; ``bytes_after`` says its size."""
        truncated = self.truncated
        for _ in range(3):  # bytes_after counts its own digits: settle the number
            size = json_size(self.out)
            if truncated.get("bytes_after") == size:
                break
            truncated["bytes_after"] = size
        return truncated["bytes_after"] <= self.max_bytes

    def other(self, note: str) -> None:
        """Record a cut under ``truncated["other"]`` (which the first such cut creates)."""
        self.truncated.setdefault("other", []).append(note)

    def sections(self) -> Iterator[dict[str, Any]]:
        """The group dicts and the unmapped-host section: everything that has tails and samples."""
        yield from self.out.get("groups", {}).values()
        if self.out.get("unmapped"):
            yield self.out["unmapped"]

    def series_groups(self) -> list[dict[str, Any]]:
        return [g for g in self.out.get("groups", {}).values() if g.get("series")]


#: How a step cuts: in rounds, yielding after each round whose result is to be measured; the walk
#: stops at the first measurement that fits.
Rounds = Callable[[_Cutting], Iterator[None]]


@dataclass(frozen=True)
class Cut:
    """One step of the cutting order: what is cut, how (:data:`Rounds`), where ``truncated`` says so."""

    what: str
    how: Rounds
    note: str


def enforce_size_limit(summary: LogSummary, max_bytes: int = DEFAULT_MAX_XCOM_BYTES) -> BoundedSummary:
    """A copy of ``summary`` whose JSON is at most ``max_bytes``, with ``truncated`` saying what was cut.

    The steps of :data:`CUTTING_ORDER` are taken in turn until it fits; when none is enough, the
    skeleton. Raises ValueError only when ``max_bytes`` is below :data:`MIN_MAX_XCOM_BYTES`; any
    summary fits.
    """
    if max_bytes < MIN_MAX_XCOM_BYTES:
        raise ValueError(f"max_xcom_bytes must be at least {MIN_MAX_XCOM_BYTES}, got {max_bytes}")
    before = json_size(summary)
    if before <= max_bytes:
        return summary
    cutting = _Cutting({**copy.deepcopy(summary)}, max_bytes, before)
    for step in CUTTING_ORDER:
        for _ in step.how(cutting):
            if cutting.fits():
                # The copy of a LogSummary, cut by steps that keep its shape (checking it all again
                # would cost every large summary a walk; tests/logs check cut summaries' shape).
                return cast("LogSummary", cutting.out)
    return _skeleton(cutting.out, cutting.truncated)


def _cut_line(line: str, chars: int) -> str:
    return line if len(line) <= chars else f"{line[:chars]}... [cut]"


def _halvings(start: int) -> list[int]:
    """start/2, start/4, ..., 1, 0."""
    out, value = [], start
    while value > 1:
        value //= 2
        out.append(max(value, 1))
    return [*dict.fromkeys(out), 0]


def _halve_series(cutting: _Cutting, groups: list[dict[str, Any]]) -> bool:
    """Halve every group's series that is above :data:`~airflow_hetero.logs.series.MIN_SERIES_POINTS`;
    False (and nothing halved) when none is."""
    from airflow_hetero.logs.series import MIN_SERIES_POINTS, halve  # only when there is something to cut

    if all(int(g["series"]["points"]) <= MIN_SERIES_POINTS for g in groups):
        return False
    for group in groups:
        if int(group["series"]["points"]) > MIN_SERIES_POINTS:
            group["series"] = halve(group["series"])
    cutting.truncated["series"] = {"points_per_group": max(int(g["series"]["points"]) for g in groups)}
    return True


def _series_to_a_share(cutting: _Cutting, share: int) -> Iterator[None]:
    """Halve the series until they take at most 1/``share`` of the bound; measured only if they do."""
    groups = cutting.series_groups()

    def small() -> bool:
        return sum(json_size(g["series"]) for g in groups) <= cutting.max_bytes // share

    while groups and not small() and _halve_series(cutting, groups):
        pass
    if small():
        yield


def _shrink_tails(cutting: _Cutting, lines: int, chars: int) -> int:
    """Keep the last ``lines`` lines per host, each at most ``chars`` long; return lines dropped."""
    dropped = 0
    for section in cutting.sections():
        for host, tail in section.get("tail", {}).items():
            keep = tail[-lines:] if lines > 0 else []
            dropped += len(tail) - len(keep)
            section["tail"][host] = [_cut_line(line, chars) for line in keep]
    return dropped


def _tails(cutting: _Cutting, first_chars: int, chars: int) -> Iterator[None]:
    """Lines over ``first_chars`` cut; then lines over ``chars``, and half the lines per host, and so on to none."""
    most = max((len(t) for s in cutting.sections() for t in s.get("tail", {}).values()), default=0)
    dropped = 0
    for lines, line_chars in [(most, first_chars), *((n, chars) for n in _halvings(most))]:
        dropped += _shrink_tails(cutting, lines, line_chars)
        cutting.truncated["tail"] = {"lines_per_host": lines, "line_chars": line_chars, "lines_dropped": dropped}
        yield


def _shrink_samples(cutting: _Cutting, count: int, chars: int) -> int:
    """Keep the first ``count`` error samples per group, lines at most ``chars``; return samples dropped."""
    dropped = 0
    for section in cutting.sections():
        samples = section.get("error_samples", [])
        keep = samples[:count]
        dropped += len(samples) - len(keep)
        for sample in keep:
            sample["line"] = _cut_line(sample["line"], chars)
            if "exception" in sample:
                sample["exception"] = _cut_line(sample["exception"], chars)
        section["error_samples"] = keep
    return dropped


def _samples(cutting: _Cutting, first_chars: int, chars: int) -> Iterator[None]:
    """Like :func:`_tails`, for the error samples of each group."""
    most = max((len(s.get("error_samples", [])) for s in cutting.sections()), default=0)
    dropped = 0
    for count, line_chars in [(most, first_chars), *((n, chars) for n in _halvings(most))]:
        dropped += _shrink_samples(cutting, count, line_chars)
        cutting.truncated["error_samples"] = {"per_group": count, "line_chars": line_chars, "dropped": dropped}
        yield


def _timeline_messages(cutting: _Cutting) -> Iterator[None]:
    for item in cutting.out.get("timeline") or ():
        item["message"] = None
    cutting.other("timeline messages")
    yield


def _problems(cutting: _Cutting, keep: int) -> Iterator[None]:
    problems = cutting.out.get("problems") or []
    if len(problems) > keep:
        cutting.other(f"problems ({len(problems) - keep} of {len(problems)} dropped)")
        cutting.out["problems_total"] = len(problems)
        cutting.out["problems"] = problems[:keep]
        yield


def _unmapped_hosts(cutting: _Cutting, keep: int) -> Iterator[None]:
    out = cutting.out
    hosts = out.get("unmapped_hosts") or []
    if len(hosts) > keep:
        cutting.other(f"unmapped_hosts ({len(hosts) - keep} of {len(hosts)} dropped)")
        out["unmapped_hosts_total"] = len(hosts)
        out["unmapped_hosts"] = hosts[:keep]
        if out.get("unmapped"):
            out["unmapped"]["hosts"] = hosts[:keep]
        yield


def _series_then_none(cutting: _Cutting) -> Iterator[None]:
    """Halve the series down to the minimum, measuring before each halving; then drop them all."""
    groups = cutting.series_groups()
    while groups:
        yield
        if not _halve_series(cutting, groups):
            for group in groups:
                group["series"] = None
            cutting.truncated["series"] = {"dropped": True}
            break
    yield


#: The verdict's keys kept when its details are cut.
_VERDICT_HEADLINE = ("kind", "bottleneck", "message", "suggestion", "waiting_share")


def _verdict_details(cutting: _Cutting) -> Iterator[None]:
    verdict = cutting.out.get("verdict")
    if isinstance(verdict, dict) and verdict.get("groups"):
        cutting.out["verdict"] = {key: verdict[key] for key in _VERDICT_HEADLINE if verdict.get(key) is not None}
        cutting.other("verdict details (per group, notes, thresholds)")
        yield


def _cost_details(cutting: _Cutting) -> Iterator[None]:
    """The price descriptions and the cost's notes go, its reasons are cut to 80 characters."""
    cost = cutting.out.get("cost")
    if not cost:
        return
    for entry in cost.get("prices", {}).values():
        entry.pop("description", None)
    for group in cost.get("groups", {}).values():
        if "reason" in group:
            group["reason"] = _cut_line(group["reason"], 80)
    cost["notes"] = []
    cutting.other("cost details")
    yield


#: The cost's keys kept when even its details were too much.
_COST_HEADLINE = ("currency", "total", "waiting")


def _cost_headline(cutting: _Cutting) -> Iterator[None]:
    """The cost's currency, total and waiting cost only."""
    cost = cutting.out.get("cost")
    if cost and "groups" in cost:
        cutting.out["cost"] = {key: cost[key] for key in _COST_HEADLINE if key in cost}
        _replace_cost_notes(cutting, "cost per group")  # which says its details went too
        yield


def _no_cost(cutting: _Cutting) -> Iterator[None]:
    if "cost" not in cutting.out:
        return
    del cutting.out["cost"]
    _replace_cost_notes(cutting, "cost")
    yield


def _replace_cost_notes(cutting: _Cutting, note: str) -> None:
    """One note for what the cost lost (a later cut says all an earlier one did)."""
    other = cutting.truncated.setdefault("other", [])
    other[:] = [*(n for n in other if not n.startswith("cost")), note]


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


def _host_lists(cutting: _Cutting, keeps: tuple[int, ...]) -> Iterator[None]:
    for keep in keeps:
        cut = _cut_host_lists(cutting.out, keep)
        if cut:
            cutting.other(f"{len(cut)} per-host lists cut to {keep} entries (each list's full length in <key>_total)")
        yield


#: The cutting order, walked by :func:`enforce_size_limit` until the summary fits. Counters,
#: metrics and utilisation are never cut; when every step is not enough, the skeleton is left.
CUTTING_ORDER: tuple[Cut, ...] = (
    Cut(
        "utilisation series, halved while they take more than a third of the bound (not below MIN_SERIES_POINTS)",
        partial(_series_to_a_share, share=3),
        "series.points_per_group",
    ),
    Cut(
        "tails: lines over 300 characters, then lines over 200 and half the lines per host, down to none",
        partial(_tails, first_chars=300, chars=200),
        "tail: lines_per_host, line_chars, lines_dropped",
    ),
    Cut(
        "error samples: lines over 300 characters, then lines over 160 and half the samples per group, down to none",
        partial(_samples, first_chars=300, chars=160),
        "error_samples: per_group, line_chars, dropped",
    ),
    Cut("the timeline's messages", _timeline_messages, "other: timeline messages"),
    Cut("problems beyond the first 3", partial(_problems, keep=3), "other: problems (n of m dropped); problems_total"),
    Cut(
        "unmapped hosts beyond the first 10",
        partial(_unmapped_hosts, keep=10),
        "other: unmapped_hosts (n of m dropped); unmapped_hosts_total",
    ),
    Cut(
        "utilisation series, halved down to MIN_SERIES_POINTS, then dropped",
        _series_then_none,
        "series.points_per_group, then series.dropped",
    ),
    Cut(
        "the verdict's details (per group, notes, thresholds): its headline stays",
        _verdict_details,
        "other: verdict details",
    ),
    Cut(
        "the cost's details: price descriptions, notes, reasons over 80 characters",
        _cost_details,
        "other: cost details",
    ),
    Cut("the cost per group and the prices: its currency, total and waiting cost stay", _cost_headline, "other"),
    Cut("the cost altogether", _no_cost, "other: cost"),
    Cut(
        "every per-host list (hosts, log_streams, mapped_by, tail; unmapped_hosts, problems) to 64, 16, 4, 1, "
        "0 entries",
        partial(_host_lists, keeps=(64, 16, 4, 1, 0)),
        "other: per-host lists cut to n entries; <key>_total",
    ),
)


def _skeleton(summary: dict[str, Any], truncated: Truncated) -> SummarySkeleton:
    """The job's status and counts only: what is left when even the cut summary is too big."""
    out: SummarySkeleton = {
        "training_job_name": summary.get("training_job_name"),
        "status": summary.get("status"),
        "secondary_status": summary.get("secondary_status"),
        "partial": summary.get("partial"),
        "errors": summary.get("errors"),
        "warnings": summary.get("warnings"),
        "failure_reason": str(summary.get("failure_reason") or "")[:300] or None,
        "groups": {
            str(name)[:64]: {"instance_count": g.get("instance_count"), "errors": g.get("errors")}
            for name, g in list(summary.get("groups", {}).items())[:5]
        },
        "truncated": truncated,
    }
    truncated["other"] = [*truncated.get("other", [])[-3:], "everything but the job's status and counts"]
    for _ in range(3):  # bytes_after counts its own digits
        truncated["bytes_after"] = json_size(out)
    return out
