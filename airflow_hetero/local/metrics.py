"""Per-host CPU and memory utilisation, sent to CloudWatch every few seconds while hosts run.

Same namespace, dimension and metric names as SageMaker's instance metrics:
``/aws/sagemaker/TrainingJobs``, ``Host=<job>/algo-N``, ``CPUUtilization`` (percent of one core,
summed over cores, so 0-100 x cores as on SageMaker) and ``MemoryUtilization`` (percent of the
machine's memory). A host's figure covers its process and all its children.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

NAMESPACE = "/aws/sagemaker/TrainingJobs"

log = logging.getLogger(__name__)


class MetricsSampler:
    """Samples watched host processes every ``interval`` seconds and puts the figures to CloudWatch."""

    def __init__(self, cloudwatch: Any, job_name: str, *, interval: float = 5.0) -> None:
        self._cloudwatch = cloudwatch
        self._job = job_name
        self._interval = interval
        self._lock = threading.Lock()
        self._hosts: dict[str, int] = {}
        self._procs: dict[int, Any] = {}
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"metrics-{job_name}", daemon=True)

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def watch(self, host: str, pid: int) -> None:
        """Sample host ``host`` whose main process is ``pid``."""
        with self._lock:
            self._hosts[host] = pid

    def unwatch(self, host: str) -> None:
        """Stop sampling ``host`` (its processes are gone)."""
        with self._lock:
            self._hosts.pop(host, None)

    def _process(self, pid: int) -> Any:
        import psutil

        proc = self._procs.get(pid)
        if proc is None:
            proc = psutil.Process(pid)
            proc.cpu_percent(None)  # the first reading only primes the counter
            self._procs[pid] = proc
        return proc

    def sample(self) -> dict[str, tuple[float, float]]:
        """Host -> (CPUUtilization, MemoryUtilization) now, for every watched host still alive."""
        import psutil

        total_memory = psutil.virtual_memory().total
        with self._lock:
            hosts = dict(self._hosts)
        figures: dict[str, tuple[float, float]] = {}
        for host, pid in hosts.items():
            try:
                leader = self._process(pid)
                procs = [leader, *(self._process(c.pid) for c in leader.children(recursive=True))]
                cpu = memory = 0.0
                for proc in procs:
                    try:
                        cpu += proc.cpu_percent(None)
                        memory += proc.memory_info().rss
                    except psutil.Error:
                        continue
                figures[host] = (round(cpu, 2), round(100.0 * memory / total_memory, 3))
            except psutil.Error:
                continue
        return figures

    def publish(self, figures: dict[str, tuple[float, float]]) -> None:
        """Put one sample of each host to CloudWatch."""
        if not figures:
            return
        now = time.time()
        data: list[dict[str, Any]] = []
        for host, (cpu, memory) in figures.items():
            dimensions = [{"Name": "Host", "Value": f"{self._job}/{host}"}]
            data.append(
                {
                    "MetricName": "CPUUtilization",
                    "Dimensions": dimensions,
                    "Timestamp": now,
                    "Value": cpu,
                    "Unit": "Percent",
                }
            )
            data.append(
                {
                    "MetricName": "MemoryUtilization",
                    "Dimensions": dimensions,
                    "Timestamp": now,
                    "Value": memory,
                    "Unit": "Percent",
                }
            )
        try:
            for start in range(0, len(data), 1000):
                self._cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=data[start : start + 1000])
        except Exception:  # metrics are best effort; the job goes on
            log.exception("could not put metrics for %s", self._job)

    def _loop(self) -> None:
        while not self._closed.wait(self._interval):
            self.publish(self.sample())

    def close(self) -> None:
        """Stop sampling."""
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join()
