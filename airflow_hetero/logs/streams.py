"""Per-stream log accumulation and host -> instance-group mapping for SageMaker training jobs (pure).

CloudWatch log streams of a heterogeneous job are named ``<job>/algo-<N>-<epoch>``; nothing in the
name tells the instance group, and host numbers do not follow group order. This module reads the
mapping out of the log lines themselves and keeps, per stream, only bounded state (counters, the
first error lines, a short tail, last/best metric values), so memory does not grow with the number
of events. The host -> group decision lives in :mod:`airflow_hetero.logs.mapping`. No Airflow,
boto3 or botocore here: the reading side (:mod:`airflow_hetero.logs.cloudwatch`) feeds events in,
:mod:`airflow_hetero.logs.per_group` turns the result into the XCom summary.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from airflow_hetero.logs.pagescan import candidate_lines, page_text
from airflow_hetero.logs.patterns import ENV_LINE, ENV_PREFIX, RESOURCE_CONFIG_KEY, LineRules
from airflow_hetero.logs.text import strip_control
from airflow_hetero.runtime import MARKER_PREFIX, parse_marker

__all__ = [
    "DEFAULT_MAX_ERROR_SAMPLES",
    "LOG_GROUP",
    "MAX_LINE_CHARS",
    "ErrorSample",
    "MetricValue",
    "StreamLog",
    "clip",
    "host_from_stream",
    "parse_group_map",
]

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
#: Stored lines (tails, error samples) are cut to this many characters; CloudWatch allows 256 KB.
MAX_LINE_CHARS = 1000
#: First error lines kept per stream (and per group after merging).
DEFAULT_MAX_ERROR_SAMPLES = 10

_MARKER_TAG = MARKER_PREFIX
_TRACEBACK_CONTINUATIONS = ("Traceback", "During handling of the above", "The above exception")
#: The line that closes a Python traceback: ``module.ExceptionName: message`` (or the name alone).
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?::|$)")
#: Other output lines that may land inside a traceback before it closes: stdout and stderr reach
#: CloudWatch apart, so a print just before a crash can sort between the frames and the exception.
MAX_INTERLEAVED_LINES = 20
_STREAM_EPOCH = re.compile(r"^(?P<host>.+)-\d{9,}$")
_ENV_LINE = re.compile(r"SM_[A-Z0-9_]*=")
_MESSAGE = itemgetter("message")
_TIMESTAMP = itemgetter("timestamp")


def host_from_stream(stream_name: str, job_name: str | None = None) -> str:
    """``<job>/algo-2-1700000000`` -> ``algo-2`` (the part after the job, without the epoch suffix)."""
    rest = stream_name
    if job_name and rest.startswith(job_name + "/"):
        rest = rest[len(job_name) + 1 :]
    elif "/" in rest:
        rest = rest.rsplit("/", 1)[1]
    match = _STREAM_EPOCH.match(rest)
    return match.group("host") if match else rest


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
    #: (host, group) of a printed ``resourceconfig.json`` (``current_host``, ``current_group_name``)
    config_claim: tuple[str, str] | None = None
    _in_traceback: ErrorSample | None = None
    _interleaved: int = 0

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
            messages = list(map(_MESSAGE, batch))
            times = list(map(_TIMESTAMP, batch))
            text = page_text(messages)
            low, high = min(times), max(times)
        except (KeyError, TypeError):  # a missing field, bytes, None: event by event
            return False
        if text is None or type(low) is not int or type(high) is not int:
            return False
        self.events += len(messages)
        self.byte_count += (
            len(text) - len(messages) + 1
            if text.isascii()
            else sum(len(m.encode("utf-8", "surrogatepass")) for m in messages)
        )
        if self.first_time is None or low < self.first_time:
            self.first_time = low
        if self.last_time is None or high > self.last_time:
            self.last_time = high
        # page_patterns end with the metrics' own: a line only they point at is a metric line only
        first_metric = len(patterns) - len(self.rules.metrics)
        metric_bits = ((1 << len(self.rules.metrics)) - 1) << first_metric
        done = self._follow_traceback(messages, times, 0)
        for index, which in candidate_lines(text, patterns, self.rules.page_literals):
            if index < done:
                continue
            if which & ~metric_bits:
                self._scan(times[index], messages[index])
                if self._in_traceback is not None:
                    done = self._follow_traceback(messages, times, index + 1)
            else:  # no traceback is open here, and no other rule can match this line
                self._metrics(times[index], messages[index], which >> first_metric)
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
        if line.startswith(ENV_PREFIX) and _ENV_LINE.match(line):
            self._env_line(line)  # toolkit configuration dump: evidence, never an error or warning
            return
        if ENV_LINE.match(line):
            return  # another line of an environment dump (SDK v3 prints them all): never an error or warning
        if RESOURCE_CONFIG_KEY in line:
            self._config_line(line)
        if _MARKER_TAG in line:
            self._marker_line(line)
        rules = self.rules
        pending = self._in_traceback
        if pending is not None and line:
            if line[0].isspace() or line.startswith(_TRACEBACK_CONTINUATIONS):
                pass  # a frame of the traceback being read: part of that one error
            elif _EXCEPTION_LINE.match(line):
                pending.exception = clip(line, 300)  # the exception line that closes the traceback
                self._in_traceback = None
            else:  # other output interleaved with the traceback: not its exception
                self._interleaved += 1
                if self._interleaved > MAX_INTERLEAVED_LINES:
                    self._in_traceback = None
        elif rules.errors is not None and rules.errors.search(line):
            self._error(timestamp, stored)
        elif rules.warnings is not None and rules.warnings.search(line):
            self.warnings += 1
        self._metrics(timestamp, line)

    def _metrics(self, timestamp: int, line: str, which: int = -1) -> None:
        """The metric values in ``line``, of the metrics whose bit is set in ``which`` (all by default)."""
        for name, regex, goal in self.rules.metrics:
            present, which = which & 1, which >> 1
            match = regex.search(line) if present else None
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
        self._interleaved = 0

    def _marker_line(self, line: str) -> None:
        text = line.strip()
        parsed = parse_marker(text) or parse_marker(text[text.index(_MARKER_TAG) :])
        if parsed is not None:
            self.marker.setdefault(parsed[0], parsed[1])

    def _config_line(self, line: str) -> None:
        """A printed ``resourceconfig.json``: the host's own group, and the whole map."""
        parsed = parse_resource_config_line(line)
        if parsed is None:
            return
        host, group, group_map = parsed
        if self.config_claim is None:
            self.config_claim = (host, group)
        if self.group_map is None:
            self.group_map = group_map

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
    data = _json_object(value)
    if data is None:
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


def parse_resource_config_line(line: str) -> tuple[str, str, dict[str, dict[str, Any]] | None] | None:
    """A ``resourceconfig.json`` printed as one line -> (current host, its group, the group map).

    None unless the line is a JSON object naming ``current_host`` and ``current_group_name``.
    """
    text = line.strip()
    data = _json_object(text) if text.startswith("{") else None
    if data is None:
        return None
    host, group = data.get("current_host"), data.get("current_group_name")
    if not isinstance(host, str) or not host or not isinstance(group, str) or not group:
        return None
    return host, group, parse_group_map("SM_RESOURCE_CONFIG", text)


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed as a JSON object; None when it is not one."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
