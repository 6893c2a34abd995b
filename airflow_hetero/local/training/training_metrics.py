"""Training metrics from ``AlgorithmSpecification.MetricDefinitions``, found in the hosts' log lines.

As SageMaker does, every output line of every host is matched against each definition's regular
expression; the first capture group (the whole match when there is none) is the value, and lines
whose value is not a number are skipped. Values go to CloudWatch in namespace
``/aws/sagemaker/TrainingJobs`` under the definition's name with the single dimension
``TrainingJobName=<job>``: exactly what the SageMaker Python SDK's ``TrainingJobAnalytics`` asks
for. The last value of each metric becomes ``FinalMetricDataList`` in DescribeTrainingJob.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from typing import Any

NAMESPACE = "/aws/sagemaker/TrainingJobs"
DIMENSION = "TrainingJobName"
_BATCH = 1000
#: Seconds :meth:`MetricMatcher.close` waits for a batch being put before it goes on.
CLOSE_TIMEOUT = 10.0

log = logging.getLogger(__name__)


def compile_definitions(definitions: list[dict[str, Any]]) -> list[tuple[str, re.Pattern[str]]]:
    """(name, compiled regex) of each metric definition; ``re.error`` for a regex Python cannot read."""
    return [(str(d["Name"]), re.compile(str(d["Regex"]))) for d in definitions]


def match_line(patterns: list[tuple[str, re.Pattern[str]]], line: str) -> list[tuple[str, float]]:
    """(metric, value) for every definition that matches ``line`` with a finite number."""
    found: list[tuple[str, float]] = []
    for name, pattern in patterns:
        match = pattern.search(line)
        if match is None:
            continue
        text = match.group(1) if pattern.groups else match.group(0)
        try:
            value = float(text)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            found.append((name, value))
    return found


class MetricMatcher:
    """Matches host output lines, queues the values and puts them to CloudWatch every ``interval`` s."""

    def __init__(
        self, cloudwatch: Any, job_name: str, definitions: list[dict[str, Any]], *, interval: float = 1.0
    ) -> None:
        self._cloudwatch = cloudwatch
        self._job = job_name
        self._patterns = compile_definitions(definitions)
        self._interval = interval
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._final: dict[str, tuple[float, float]] = {}
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"algometrics-{job_name}", daemon=True)

    def start(self) -> None:
        """Start the publishing thread (not needed when the job defines no metric)."""
        if self._patterns:
            self._thread.start()

    def observe(self, line: str, timestamp_ms: int) -> None:
        """Match one host output line."""
        if not self._patterns:
            return
        found = match_line(self._patterns, line)
        if not found:
            return
        stamp = timestamp_ms / 1000.0
        with self._lock:
            for name, value in found:
                self._final[name] = (value, stamp)
                self._pending.append(
                    {
                        "MetricName": name,
                        "Dimensions": [{"Name": DIMENSION, "Value": self._job}],
                        "Timestamp": stamp,
                        "Value": value,
                    }
                )

    def final_metrics(self) -> list[dict[str, Any]]:
        """``FinalMetricDataList``: the last value of each metric seen, in definition order."""
        with self._lock:
            order = [name for name, _ in self._patterns]
            return [
                {"MetricName": name, "Value": self._final[name][0], "Timestamp": self._final[name][1]}
                for name in dict.fromkeys(order)
                if name in self._final
            ]

    def flush(self) -> None:
        """Put everything queued so far (best effort: a failed put is logged, the job goes on)."""
        with self._lock:
            data, self._pending = self._pending, []
        try:
            for start in range(0, len(data), _BATCH):
                self._cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=data[start : start + _BATCH])
        except Exception:
            log.exception("could not put training metrics of %s", self._job)

    def _loop(self) -> None:
        while not self._closed.wait(self._interval):
            self.flush()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop the thread (waiting at most ``timeout`` seconds for a batch being sent), then flush.

        A thread still putting after ``timeout`` is logged and left behind (a daemon)."""
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning(
                    "training metrics of %s: a batch was still being put %.1f s after the close; going on",
                    self._job,
                    timeout,
                )
        self.flush()
