"""Follow the CloudWatch log streams of a running training job, host by host.

Streams are ``<job>/algo-<N>-<epoch>`` in ``/aws/sagemaker/TrainingJobs``; a host may own several.
Each poll reads only what is new in every known stream (one remembered forward token per stream)
and lists streams again only when new ones may exist: while fewer hosts have been seen than the
job has instances, when the caller says so (a status transition), and on the final flush. Lines
are prefixed ``[group/host]`` once the host's instance group is known from the logs themselves
(DESIGN.md section 4), otherwise ``[host]``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_hetero._retry import RetryPolicy, call_with_retry, error_code
from airflow_hetero.job.resource_config import instance_groups
from airflow_hetero.logs.mapping import resolve_mapping
from airflow_hetero.logs.patterns import LineRules
from airflow_hetero.logs.streams import LOG_GROUP, StreamLog, host_from_stream
from airflow_hetero.logs.text import strip_control

log = logging.getLogger(__name__)

#: GetLogEvents returns at most 10,000 events or 1 MB (messages + 26 bytes each) per call.
MAX_EVENTS_PER_PAGE = 10_000
EVENT_OVERHEAD_BYTES = 26
#: A page this close to 1 MB was cut by the size limit.
FULL_PAGE_BYTES = 1_048_576 - 64 * 1024


class LogsGroupResolver:
    """Learns host -> instance group from log lines with :mod:`airflow_hetero.logs.streams`
    (the same evidence rules as the summaries).

    The mapping is recomputed only when a host is asked for that is not mapped yet and new lines
    have arrived since the last attempt, so following a chatty job stays cheap.
    """

    def __init__(self, describe: dict[str, Any] | None = None) -> None:
        self._rules = LineRules.build(error_patterns=[], warning_patterns=[], metric_definitions=[])
        self._groups = instance_groups(describe)
        self._streams: dict[str, StreamLog] = {}
        self._known: dict[str, str] = {}
        self._dirty = False

    def feed(self, stream: str, host: str, message: str) -> None:
        """Fold one event into the stream's bounded evidence."""
        log_ = self._streams.get(stream)
        if log_ is None:
            log_ = self._streams[stream] = StreamLog(
                stream=stream, host=host, rules=self._rules, tail_lines=0, max_error_samples=0
            )
        log_.add(0, message)
        self._dirty = True

    def group_of(self, host: str) -> str | None:
        """The host's group by the most trusted evidence seen so far."""
        if host not in self._known and self._dirty:
            self._known = dict(resolve_mapping(list(self._streams.values()), self._groups).host_to_group)
            self._dirty = False
        return self._known.get(host)


@dataclass
class _Stream:
    name: str
    host: str
    token: str | None = None


@dataclass
class LogTailer:
    """Incremental reader of one job's log streams; ``poll()`` emits each new line once.

    :param logs_client: a boto3 CloudWatch Logs client (from ``HeteroTrainingHook.logs_client``).
    :param emit: called with each formatted line.
    :param resolver: host -> group knowledge fed with every line read.
    :param expected_hosts: instances in the job; streams are listed while fewer hosts were seen.
    """

    logs_client: Any
    job_name: str
    emit: Callable[[str], None]
    resolver: LogsGroupResolver
    expected_hosts: int = 0
    log_group: str = LOG_GROUP
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    streams: dict[str, _Stream] = field(default_factory=dict)
    list_calls: int = 0
    get_calls: int = 0

    @property
    def hosts_seen(self) -> set[str]:
        """Hosts that have at least one stream."""
        return {s.host for s in self.streams.values()}

    def poll(self, *, rescan: bool = False) -> int:
        """Emit lines that arrived since the last poll; returns how many were emitted.

        One GetLogEvents per stream (more only while pages come back full), and each page goes out
        as it arrives, in order within its stream: memory holds one page, whatever the interval,
        the log rate or the number of hosts.
        """
        if rescan or not self.streams or len(self.hosts_seen) < self.expected_hosts:
            self._list_streams()
        return sum(self._drain(stream, to_end=False) for stream in list(self.streams.values()))

    def flush(self) -> int:
        """Final read after the job ended: list streams once more and read each one to its end."""
        self._list_streams()
        return sum(self._drain(stream, to_end=True) for stream in list(self.streams.values()))

    def emit_tail(self, lines: int = 50, head_events: int = 300) -> int:
        """Stateless summary for a finished job: the last ``lines`` events of every stream.

        Each stream's first ``head_events`` events are read (not emitted) to learn the host's
        group from the start-up lines. Used where no tokens can be kept between calls (sensor
        pokes, the end of a deferred wait). Returns how many lines were emitted.
        """
        self._list_streams()
        events: list[tuple[int, int, str, str]] = []
        for order, stream in enumerate(self.streams.values()):
            for from_head, limit in ((True, head_events), (False, lines)):
                page = call_with_retry(
                    self.logs_client.get_log_events,
                    policy=self.retry_policy,
                    what=f"GetLogEvents {stream.name}",
                    logGroupName=self.log_group,
                    logStreamName=stream.name,
                    startFromHead=from_head,
                    limit=limit,
                )
                for event in page.get("events", []):
                    message = str(event.get("message", "")).rstrip("\n")
                    if from_head:
                        self.resolver.feed(stream.name, stream.host, message)
                    else:
                        events.append((int(event.get("timestamp", 0)), order, stream.host, message))
        events.sort(key=lambda e: (e[0], e[1]))
        for _, _, host, message in events:
            self.emit(strip_control(f"{self.prefix(host)} {message}"))
        return len(events)

    def prefix(self, host: str) -> str:
        """``[group/host]`` once the group is known, else ``[host]``."""
        group = self.resolver.group_of(host)
        return f"[{group}/{host}]" if group else f"[{host}]"

    def _list_streams(self) -> None:
        self.list_calls += 1
        kwargs: dict[str, Any] = {"logGroupName": self.log_group, "logStreamNamePrefix": self.job_name + "/"}
        while True:
            try:
                page = call_with_retry(
                    self.logs_client.describe_log_streams,
                    policy=self.retry_policy,
                    what=f"DescribeLogStreams {self.job_name}",
                    **kwargs,
                )
            except Exception as exc:
                if error_code(exc) == "ResourceNotFoundException":
                    return  # the log group does not exist yet: no job has logged in this region
                raise
            for item in page.get("logStreams", []):
                name = item["logStreamName"]
                if name not in self.streams:
                    self.streams[name] = _Stream(name=name, host=host_from_stream(name, self.job_name))
            token = page.get("nextToken")
            if not token or token == kwargs.get("nextToken"):
                return
            kwargs["nextToken"] = token

    def _drain(self, stream: _Stream, *, to_end: bool) -> int:
        """Read ``stream`` from its remembered token and emit page by page; lines emitted.

        Live polls stop after one page unless it came back full (there is more right now); the
        final flush goes on until the service returns the token it was sent (the stream's end).
        """
        emitted = 0
        while True:
            kwargs: dict[str, Any] = {
                "logGroupName": self.log_group,
                "logStreamName": stream.name,
                "startFromHead": True,
            }
            if stream.token:
                kwargs["nextToken"] = stream.token
            page = call_with_retry(
                self.logs_client.get_log_events,
                policy=self.retry_policy,
                what=f"GetLogEvents {stream.name}",
                **kwargs,
            )
            self.get_calls += 1
            events = page.get("events", [])
            messages = [str(event.get("message", "")).rstrip("\n") for event in events]
            # feed the whole page before formatting it, so a marker line in this page also labels
            # the lines just before it
            for message in messages:
                self.resolver.feed(stream.name, stream.host, message)
            prefix = self.prefix(stream.host)
            for message in messages:
                self.emit(strip_control(f"{prefix} {message}"))
            emitted += len(messages)
            token = page.get("nextForwardToken")
            # At the end of a stream the service returns the token that was sent; pages can be
            # empty yet carry a new token.
            moved = bool(token) and token != stream.token
            if moved:
                stream.token = token
            full = _page_is_full(events)
            del page, events, messages  # one page alive at a time, also while the next is read
            if not moved or not (to_end or full):
                return emitted


def _page_is_full(events: list[dict[str, Any]]) -> bool:
    """A page cut by GetLogEvents' limits (10,000 events or 1 MB): more events are waiting."""
    if len(events) >= MAX_EVENTS_PER_PAGE:
        return True
    size = sum(len(str(event.get("message", ""))) + EVENT_OVERHEAD_BYTES for event in events)
    return size >= FULL_PAGE_BYTES
