"""Ship host output to CloudWatch Logs while the job runs, as SageMaker does.

Each host writes to its own stream ``<job>/algo-N-<epoch>`` in ``/aws/sagemaker/TrainingJobs``,
one event per output line. Lines are batched and sent every ``interval`` seconds by one thread
per job, with ordinary ``put_log_events`` calls against the endpoint's own URL.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
_MAX_EVENTS = 10_000
_MAX_BYTES = 1_000_000
_MAX_EVENT_BYTES = 256 * 1024 - 26
#: Seconds :meth:`LogShipper.close` waits for a batch being sent before it goes on.
CLOSE_TIMEOUT = 10.0

log = logging.getLogger(__name__)


def stream_name(job_name: str, host: str, epoch: int) -> str:
    """SageMaker's stream name for a host: ``<job>/algo-N-<epoch>``."""
    return f"{job_name}/{host}-{epoch}"


class LogShipper:
    """Collects lines per stream and sends them in order, in batches within the service limits."""

    def __init__(self, logs: Any, *, interval: float = 1.0) -> None:
        self._logs = logs
        self._interval = interval
        self._lock = threading.Lock()
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="logship", daemon=True)
        self._group_ready = False

    def start(self) -> None:
        """Start the flushing thread."""
        self._thread.start()

    def open_stream(self, name: str) -> None:
        """Create stream ``name`` (and the log group on first use)."""
        if not self._group_ready:
            with contextlib.suppress(self._logs.exceptions.ResourceAlreadyExistsException):
                self._logs.create_log_group(logGroupName=LOG_GROUP)
            self._group_ready = True
        with contextlib.suppress(self._logs.exceptions.ResourceAlreadyExistsException):
            self._logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=name)
        with self._lock:
            self._pending.setdefault(name, [])

    def emit(self, stream: str, line: str, timestamp_ms: int | None = None) -> None:
        """Queue one line (empty lines are dropped: CloudWatch events cannot be empty)."""
        if not line:
            return
        message = line.encode("utf-8")[:_MAX_EVENT_BYTES].decode("utf-8", "ignore")
        event = {
            "timestamp": timestamp_ms if timestamp_ms is not None else int(time.time() * 1000),
            "message": message,
        }
        with self._lock:
            self._pending.setdefault(stream, []).append(event)

    def flush(self) -> None:
        """Send everything queued so far."""
        with self._lock:
            batches = {name: events for name, events in self._pending.items() if events}
            for name in batches:
                self._pending[name] = []
        for name, events in batches.items():
            events.sort(key=lambda e: e["timestamp"])
            start = 0
            while start < len(events):
                end, size = start, 0
                while end < len(events) and end - start < _MAX_EVENTS:
                    size += len(events[end]["message"].encode("utf-8")) + 26
                    if size > _MAX_BYTES:
                        break
                    end += 1
                self._put(name, events[start:end])
                start = end

    def _put(self, stream: str, events: list[dict[str, Any]]) -> None:
        try:
            self._logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)
        except Exception:  # the job must go on even if one batch of its logs is lost
            log.exception("could not ship %d log events to %s", len(events), stream)

    def _loop(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            self.flush()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop the thread (waiting at most ``timeout`` seconds for a batch being sent), then flush.

        A thread still sending after ``timeout`` is logged and left behind (a daemon); what is queued
        is flushed here all the same."""
        self._closed.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("log shipping: a batch was still being sent %.1f s after the close; going on", timeout)
        self.flush()
