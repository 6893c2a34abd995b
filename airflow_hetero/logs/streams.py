"""Per-stream log accumulation and host -> instance-group mapping for SageMaker training jobs (pure).

CloudWatch log streams of a heterogeneous job are named ``<job>/algo-<N>-<epoch>``; nothing in the
name tells the instance group, and host numbers do not follow group order. This module reads the
mapping out of the log lines themselves and keeps, per stream, only bounded state (counters, the
first error lines, a short tail, last/best metric values), so memory does not grow with the number
of events. The host -> group decision lives in :mod:`airflow_hetero.logs.mapping`. No Airflow,
boto3 or botocore here: the reading side (:mod:`airflow_hetero.logs.cloudwatch`) feeds events in,
:mod:`airflow_hetero.logs.summary` turns the result into the XCom summary.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_hetero.logs.pagescan import candidate_lines, page_scannable, page_text
from airflow_hetero.logs.text import strip_control
from airflow_hetero.runtime import parse_marker

__all__ = [
    "DEFAULT_ERROR_PATTERNS",
    "DEFAULT_MAX_ERROR_SAMPLES",
    "DEFAULT_WARNING_PATTERNS",
    "LOG_GROUP",
    "MAX_LINE_CHARS",
    "AnyPattern",
    "ErrorSample",
    "LineRules",
    "MetricValue",
    "StreamLog",
    "clip",
    "compile_patterns",
    "host_from_stream",
    "metric_goal",
    "parse_group_map",
]

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
#: Stored lines (tails, error samples) are cut to this many characters; CloudWatch allows 256 KB.
MAX_LINE_CHARS = 1000
#: First error lines kept per stream (and per group after merging).
DEFAULT_MAX_ERROR_SAMPLES = 10

#: Default error patterns: Python tracebacks, log-level ERROR/CRITICAL/FATAL, CUDA and NCCL
#: failures, out-of-memory kills (kernel "Out of memory: Killed process", a shell's "Killed" line or
#: "<pid> Killed", mpirun's "(Killed)", Kubernetes-style OOMKilled, Python MemoryError), the
#: toolkit's ExecuteUserScriptError / ExitCode 137 and segmentation faults. Level words must stand
#: alone (``ERROR:``, ``ERROR ``, ``[ERROR]``), so ``--NCCL_DEBUG WARN"`` or a metric called
#: ``train:error`` do not count. Each pattern starts with a literal: the regex engine then skips
#: ahead quickly, which keeps the per-line cost low (about 0.2 us here).
DEFAULT_ERROR_PATTERNS: tuple[str, ...] = (
    r"Traceback \(most recent call last\)",
    r"ERROR(?<![\w-]ERROR)(?=[\s:\]]|$)",
    r"CRITICAL(?<![\w-]CRITICAL)(?=[\s:\]]|$)",
    r"FATAL(?<![\w-]FATAL)(?=[\s:\]]|$)",
    r"CUDA error",
    r"CUDA out of memory",
    r"CUBLAS_STATUS_(?!SUCCESS)\w+",
    r"CUDNN_STATUS_(?!SUCCESS)\w+",
    r"NCCL (?:error|Error|ERROR)",
    r"NCCL_\w+ failed",
    r"nccl(?:Internal|System|UnhandledCuda|InvalidUsage|InvalidArgument|Remote)Error",
    r"Out of memory",
    r"OOMKilled",
    r"Killed process \d+",
    r"Killed(?<=^Killed)\s*$",
    r"Killed(?<=\d Killed)",
    r"Killed(?<=\(Killed)",
    r"MemoryError",
    r"ExecuteUserScriptError",
    r"ExitCode 137\b",
    r"Segmentation fault",
)
#: Default warning patterns: log-level WARN/WARNING standing alone and Python ``...Warning:`` lines.
DEFAULT_WARNING_PATTERNS: tuple[str, ...] = (
    r"WARN(?<![\w-]WARN)(?:ING)?(?=[\s:\]]|$)",
    r"Warning: (?<=[a-z]Warning: )",
)

_MARKER_TAG = "[airflow-hetero]"
_TRACEBACK_CONTINUATIONS = ("Traceback", "During handling of the above", "The above exception")
_STREAM_EPOCH = re.compile(r"^(?P<host>.+)-\d{9,}$")
_ENV_LINE = re.compile(r"SM_[A-Z0-9_]*=")


class AnyPattern:
    """Matches a line when any of several regexes does (for patterns that cannot share one regex)."""

    def __init__(self, patterns: list[re.Pattern[str]]) -> None:
        self.patterns = patterns

    def search(self, line: str) -> bool:
        """True when one of the patterns is found in ``line``."""
        return any(p.search(line) for p in self.patterns)


def compile_patterns(patterns: Iterable[str]) -> re.Pattern[str] | AnyPattern | None:
    """One matcher for any of ``patterns`` (None when there are none). Bad regexes raise ValueError.

    The patterns are joined into one top-level alternation, so the engine can skip quickly to
    the first characters they start with; patterns that cannot be joined (global inline flags
    such as ``(?i)``) are searched one by one.
    """
    items = [p for p in patterns if p]
    if not items:
        return None
    compiled = []
    for p in items:
        try:
            compiled.append(re.compile(p, re.MULTILINE))
        except re.error as exc:
            raise ValueError(f"invalid pattern {p!r}: {exc}") from None
    try:
        return re.compile("|".join(items), re.MULTILINE)
    except re.error:
        return AnyPattern(compiled)


def host_from_stream(stream_name: str, job_name: str | None = None) -> str:
    """``<job>/algo-2-1700000000`` -> ``algo-2`` (the part after the job, without the epoch suffix)."""
    rest = stream_name
    if job_name and rest.startswith(job_name + "/"):
        rest = rest[len(job_name) + 1 :]
    elif "/" in rest:
        rest = rest.rsplit("/", 1)[1]
    match = _STREAM_EPOCH.match(rest)
    return match.group("host") if match else rest


def metric_goal(name: str) -> str:
    """``"min"`` for metrics whose name contains "loss" or "error" (case-insensitive), else ``"max"``."""
    lowered = name.lower()
    return "min" if "loss" in lowered or "error" in lowered else "max"


def clip(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """Cut ``line`` to ``limit`` characters, saying how much was cut."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... [+{len(line) - limit} chars]"


@dataclass
class MetricValue:
    """Last and best value of one metric (``goal`` says whether best is the minimum or the maximum)."""

    goal: str
    last: float
    last_time: int
    best: float
    count: int = 1

    def update(self, value: float, timestamp: int) -> None:
        """Fold in one parsed value."""
        self.count += 1
        if timestamp >= self.last_time:
            self.last, self.last_time = value, timestamp
        if (value < self.best) if self.goal == "min" else (value > self.best):
            self.best = value

    def merge(self, other: MetricValue) -> None:
        """Fold in another host's or stream's values of the same metric."""
        self.count += other.count
        if other.last_time >= self.last_time:
            self.last, self.last_time = other.last, other.last_time
        if (other.best < self.best) if self.goal == "min" else (other.best > self.best):
            self.best = other.best


@dataclass
class LineRules:
    """What to look for in each line: error/warning regexes and the job's MetricDefinitions."""

    errors: re.Pattern[str] | AnyPattern | None
    warnings: re.Pattern[str] | AnyPattern | None
    metrics: list[tuple[str, re.Pattern[str], str]]
    #: The same regexes for scanning a whole page at once (:mod:`~airflow_hetero.logs.pagescan`);
    #: None when one of them could match differently there, and pages go line by line.
    page_patterns: list[re.Pattern[str]] | None = None

    @classmethod
    def build(
        cls,
        error_patterns: Iterable[str] | None = None,
        warning_patterns: Iterable[str] | None = None,
        metric_definitions: Iterable[Mapping[str, Any]] | None = None,
    ) -> LineRules:
        """Compile the patterns; ``None`` means the defaults, an empty list means "none"."""
        metrics: list[tuple[str, re.Pattern[str], str]] = []
        errors = DEFAULT_ERROR_PATTERNS if error_patterns is None else tuple(error_patterns)
        warnings = DEFAULT_WARNING_PATTERNS if warning_patterns is None else tuple(warning_patterns)
        for item in metric_definitions or ():
            name, regex = str(item.get("Name", "")), str(item.get("Regex", ""))
            if not name or not regex:
                raise ValueError(f"metric definition needs Name and Regex: {dict(item)!r}")
            try:
                metrics.append((name, re.compile(regex), metric_goal(name)))
            except re.error as exc:
                raise ValueError(f"invalid regex for metric {name!r}: {exc}") from None
        rules = cls(errors=compile_patterns(errors), warnings=compile_patterns(warnings), metrics=metrics)
        reviewed = DEFAULT_ERROR_PATTERNS + DEFAULT_WARNING_PATTERNS
        sources = [p for p in errors + warnings if p] + [regex.pattern for _, regex, _ in metrics]
        joined = [m for m in (rules.errors, rules.warnings) if m is not None]
        if all(isinstance(m, re.Pattern) for m in joined) and all(
            page_scannable(source, reviewed=reviewed) for source in sources
        ):
            # per line, ^ and $ are the line's ends; in a joined page only with MULTILINE
            rules.page_patterns = [m for m in joined if isinstance(m, re.Pattern)] + [
                re.compile(regex.pattern, regex.flags | re.MULTILINE) for _, regex, _ in metrics
            ]
        return rules


@dataclass
class ErrorSample:
    """One error line with where and when it was logged."""

    host: str
    timestamp: int
    line: str
    exception: str | None = None


@dataclass
class StreamLog:
    """Bounded accumulator for one log stream: counters, evidence for the host's group, samples, tail.

    Feed events with :meth:`add` in stream order. Memory is bounded by ``tail_lines`` and
    ``max_error_samples`` (each stored line cut to :data:`MAX_LINE_CHARS`), not by the event count.
    """

    stream: str
    host: str
    rules: LineRules
    tail_lines: int = 20
    max_error_samples: int = DEFAULT_MAX_ERROR_SAMPLES
    events: int = 0
    byte_count: int = 0
    errors: int = 0
    warnings: int = 0
    first_time: int | None = None
    last_time: int | None = None
    error_samples: list[ErrorSample] = field(default_factory=list)
    tail: deque[tuple[int, str]] = field(init=False)
    metrics: dict[str, MetricValue] = field(default_factory=dict)
    marker: dict[str, str] = field(default_factory=dict)
    current_host: str | None = None
    current_group: str | None = None
    group_map: dict[str, dict[str, Any]] | None = None
    _in_traceback: ErrorSample | None = None

    def __post_init__(self) -> None:
        self.tail = deque(maxlen=max(self.tail_lines, 0))

    def add_events(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Fold in CloudWatch events (dicts with ``timestamp`` and ``message``), a page at a time.

        Same result as :meth:`add` per event; a page of plain one-line messages is scanned at once
        (:mod:`~airflow_hetero.logs.pagescan`), so only the lines a rule points at are looked at.
        """
        batch = events if isinstance(events, list) else list(events)
        if not batch or not self._add_page(batch):
            for event in batch:
                self.add(int(event.get("timestamp") or 0), event.get("message", ""))

    def _add_page(self, batch: list[Mapping[str, Any]]) -> bool:
        """The page-at-once path; False (nothing changed) when the page must go event by event."""
        patterns = self.rules.page_patterns
        if patterns is None:
            return False
        try:
            messages = [event["message"] for event in batch]
            times = [event["timestamp"] for event in batch]
            page = page_text(messages)
            low, high = min(times), max(times)
        except (KeyError, TypeError):  # a missing field, bytes, None: event by event
            return False
        if page is None or type(low) is not int or type(high) is not int:
            return False
        text, lengths = page
        self.events += len(messages)
        self.byte_count += len(text) - len(messages) + 1 if text.isascii() else sum(
            len(m.encode("utf-8", "surrogatepass")) for m in messages
        )
        if self.first_time is None or low < self.first_time:
            self.first_time = low
        if self.last_time is None or high > self.last_time:
            self.last_time = high
        done = self._follow_traceback(messages, times, 0)
        for index in candidate_lines(text, lengths, patterns, ("SM_", _MARKER_TAG)):
            if index >= done:
                self._scan(times[index], messages[index])
                done = self._follow_traceback(messages, times, index + 1)
        if self.tail.maxlen:
            picked: list[tuple[int, str]] = []
            for index in range(len(messages) - 1, -1, -1):
                line = messages[index]
                if line and not line.isspace():
                    picked.append((times[index], clip(line) if len(line) > MAX_LINE_CHARS else line))
                    if len(picked) == self.tail.maxlen:
                        break
            self.tail.extend(reversed(picked))
        return True

    def _follow_traceback(self, messages: list[str], times: list[int], start: int) -> int:
        """Read lines from ``start`` while a traceback is open; the index after the last one read."""
        index = start
        while self._in_traceback is not None and index < len(messages):
            self._scan(times[index], messages[index])
            index += 1
        return index

    def add(self, timestamp: int, message: str | bytes) -> None:
        """Fold in one event; a message with embedded newlines counts as one event, several lines."""
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        self.events += 1
        ascii_only = message.isascii()
        self.byte_count += len(message) if ascii_only else len(message.encode("utf-8", "surrogatepass"))
        if self.first_time is None or timestamp < self.first_time:
            self.first_time = timestamp
        if self.last_time is None or timestamp > self.last_time:
            self.last_time = timestamp
        if "\n" in message or "\r" in message:
            for line in message.splitlines():
                self._line(timestamp, line)
        else:
            self._line(timestamp, message)

    def _line(self, timestamp: int, line: str) -> None:
        if "\x1b" in line:  # ANSI colours: matched and stored without them (a memchr, ~20 ns)
            line = strip_control(line)
        stored = clip(line) if len(line) > MAX_LINE_CHARS else line
        if stored and not stored.isspace():
            self.tail.append((timestamp, stored))
        self._scan(timestamp, line, stored)

    def _scan(self, timestamp: int, line: str, stored: str | None = None) -> None:
        """Everything a line means except the tail: evidence, errors, warnings, metrics."""
        if stored is None:
            stored = clip(line) if len(line) > MAX_LINE_CHARS else line
        if line.startswith("SM_") and _ENV_LINE.match(line):
            self._env_line(line)  # toolkit configuration dump: evidence, never an error or warning
            return
        if _MARKER_TAG in line:
            self._marker_line(line)
        rules = self.rules
        pending = self._in_traceback
        if pending is not None and line:
            if line[0].isspace() or line.startswith(_TRACEBACK_CONTINUATIONS):
                pass  # a frame of the traceback being read: part of that one error
            else:
                pending.exception = clip(line, 300)  # the exception line that closes the traceback
                self._in_traceback = None
        elif rules.errors is not None and rules.errors.search(line):
            self._error(timestamp, stored)
        elif rules.warnings is not None and rules.warnings.search(line):
            self.warnings += 1
        for name, regex, goal in rules.metrics:
            match = regex.search(line)
            if match is None:
                continue
            try:
                value = float(match.group(1) if regex.groups else match.group(0))
            except (ValueError, IndexError, TypeError):
                continue
            current = self.metrics.get(name)
            if current is None:
                self.metrics[name] = MetricValue(goal, value, timestamp, value)
            else:
                current.update(value, timestamp)

    def _error(self, timestamp: int, stored: str) -> None:
        self.errors += 1
        sample = ErrorSample(self.host, timestamp, stored)
        if len(self.error_samples) < self.max_error_samples:
            self.error_samples.append(sample)
        # A traceback is one error: its frames and closing exception line are not counted again.
        self._in_traceback = sample if stored.startswith("Traceback") else None

    def _marker_line(self, line: str) -> None:
        text = line.strip()
        parsed = parse_marker(text) or parse_marker(text[text.index(_MARKER_TAG) :])
        if parsed is not None:
            self.marker.setdefault(parsed[0], parsed[1])

    def _env_line(self, line: str) -> None:
        key, _, value = line.rstrip().partition("=")
        if key == "SM_CURRENT_HOST" and self.current_host is None and value:
            self.current_host = value
        elif key == "SM_CURRENT_INSTANCE_GROUP" and self.current_group is None and value:
            self.current_group = value
        elif key in ("SM_RESOURCE_CONFIG", "SM_INSTANCE_GROUPS_DICT") and self.group_map is None:
            self.group_map = parse_group_map(key, value)


def parse_group_map(key: str, value: str) -> dict[str, dict[str, Any]] | None:
    """``SM_RESOURCE_CONFIG`` / ``SM_INSTANCE_GROUPS_DICT`` JSON -> {group: {instance_type, hosts}}.

    Returns None for anything that is not the expected shape (a line cut short, another format).
    """
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    items: Iterable[Any]
    items = data.get("instance_groups") or () if key == "SM_RESOURCE_CONFIG" else data.values()
    result: dict[str, dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict):
            return None
        name, hosts = item.get("instance_group_name"), item.get("hosts")
        if not isinstance(name, str) or not isinstance(hosts, list):
            return None
        result[name] = {
            "instance_type": item.get("instance_type"),
            "hosts": [str(h) for h in hosts],
        }
    return result or None
