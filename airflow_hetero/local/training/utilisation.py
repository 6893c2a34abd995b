"""Per-host CPU and memory utilisation, sent to CloudWatch every few seconds while hosts run.

Same namespace, dimension and metric names as SageMaker's instance metrics:
``/aws/sagemaker/TrainingJobs``, ``Host=<job>/algo-N``, ``CPUUtilization`` (percent of one core,
summed over cores, so 0-100 x cores as on SageMaker) and ``MemoryUtilization`` (percent of the
machine's memory). A host's figure covers its process and all its children.

Each CPU figure is the host's CPU time since its previous figure (the first one: since the host
started) over the wall time in between, so no figure is a "priming" zero. Besides the figures
every ``interval`` seconds, a host gets its first figure once it has run ``FIRST_FIGURE_AFTER``
seconds, and when it ends :meth:`MetricsSampler.finish` adds a last CPU figure from the kernel's
account of its run (:class:`airflow_hetero.local.host.process.HostUsage`). A host that ended
before any figure of its own (very short, or a busy machine kept the sampler from it) gets its
peak resident memory as its one memory figure instead. So hosts that live shorter than one
interval, common on a laptop, still report CPU and memory utilisation.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero.local.host.process import HostUsage

NAMESPACE = "/aws/sagemaker/TrainingJobs"
#: Seconds a host runs before its first figure (then one every ``interval``).
FIRST_FIGURE_AFTER = 0.1
#: A host's last figure is skipped when a figure was taken less than this many seconds before it ended.
MIN_FINAL_SPAN = 0.05
#: Seconds :meth:`MetricsSampler.close` waits for a sample being sent before it goes on.
CLOSE_TIMEOUT = 10.0

log = logging.getLogger(__name__)


@dataclass
class _Host:
    """A watched host: its main process and the CPU account at its last figure."""

    process: Any  # psutil.Process of the host's main process, None when it was gone at once
    wall: float  # epoch seconds of the last figure (at first: when the process started)
    cpu: float  # CPU seconds of the host's process tree at ``wall``
    figures: int = 0


def _tree_usage(leader: Any) -> tuple[float, int] | None:
    """(CPU seconds, resident bytes) of ``leader`` and its descendants; None once it has exited.

    A process's CPU time includes that of its reaped children, so the sum over the living tree
    only grows while children come and go. A tree that exits between the status check and the reads
    (nothing resident left) is None too: a figure of 0 % memory would hide the peak ``finish`` puts.
    """
    import psutil

    try:
        if leader.status() == psutil.STATUS_ZOMBIE:
            return None  # exited; finish() accounts for the rest of its run
        procs = [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return None
    cpu, rss = 0.0, 0
    for proc in procs:
        try:
            times = proc.cpu_times()
            cpu += times.user + times.system
            cpu += getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)
            rss += proc.memory_info().rss
        except psutil.Error:
            continue
    return (cpu, rss) if rss else None


class MetricsSampler:
    """Samples watched host processes every ``interval`` seconds and puts the figures to CloudWatch."""

    def __init__(self, cloudwatch: Any, job_name: str, *, interval: float = 5.0) -> None:
        self._cloudwatch = cloudwatch
        self._job = job_name
        self._interval = interval
        self._lock = threading.Lock()
        self._hosts: dict[str, _Host] = {}
        self._max_cpu = 100.0 * (os.cpu_count() or 1)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"metrics-{job_name}", daemon=True)

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def watch(self, host: str, pid: int) -> None:
        """Sample host ``host`` whose main process is ``pid`` (CPU counted from the process's start)."""
        import psutil

        now = time.time()
        try:
            process = psutil.Process(pid)
            started = min(process.create_time(), now)
        except psutil.Error:
            process, started = None, now
        with self._lock:
            self._hosts[host] = _Host(process, started, 0.0)

    def unwatch(self, host: str) -> None:
        """Stop sampling ``host`` without a last figure."""
        with self._lock:
            self._hosts.pop(host, None)

    def _cpu_percent(self, state: _Host, cpu: float, now: float) -> float:
        span = max(now - state.wall, 1e-3)
        return round(min(max(cpu - state.cpu, 0.0) / span * 100.0, self._max_cpu), 2)

    def sample(self, *, first_only: bool = False) -> dict[str, tuple[float, float | None]]:
        """Host -> (CPUUtilization, MemoryUtilization) now, for every watched host still alive.

        CPU is the average since the host's previous figure (or its start). ``first_only``: only
        hosts without a figure yet that have run ``FIRST_FIGURE_AFTER`` seconds.
        """
        import psutil

        figures: dict[str, tuple[float, float | None]] = {}
        with self._lock:
            due = {
                host: state
                for host, state in self._hosts.items()
                if not first_only or (state.figures == 0 and time.time() - state.wall >= FIRST_FIGURE_AFTER)
            }
            if not due:
                return figures
            total_memory = psutil.virtual_memory().total
            for host, state in due.items():
                usage = _tree_usage(state.process) if state.process is not None else None
                if usage is None:
                    continue
                now = time.time()
                cpu, rss = usage
                figures[host] = (self._cpu_percent(state, cpu, now), round(100.0 * rss / total_memory, 3))
                state.wall, state.cpu, state.figures = now, max(cpu, state.cpu), state.figures + 1
        return figures

    def finish(self, host: str, usage: HostUsage | None) -> None:
        """Stop sampling ``host`` and put its last CPU figure (since its previous figure) from
        ``usage``, the kernel's account when it was reaped (None: no last figure); a host never
        sampled also gets its peak memory."""
        with self._lock:
            state = self._hosts.pop(host, None)
        if state is None or usage is None:
            return
        if state.figures and usage.ended - state.wall < MIN_FINAL_SPAN:
            return  # a figure was just taken; a last one over a few ms would only be noise
        cpu = self._cpu_percent(state, usage.cpu_seconds, usage.ended)
        memory = None
        if not state.figures and usage.peak_rss:  # no sample caught it alive: its peak is all there is
            import psutil

            memory = round(100.0 * usage.peak_rss / psutil.virtual_memory().total, 3)
        self.publish({host: (cpu, memory)}, at=max(usage.ended, state.wall))

    def publish(self, figures: dict[str, tuple[float, float | None]], at: float | None = None) -> None:
        """Put one figure of each host to CloudWatch, stamped ``at`` (epoch seconds; default now);
        a memory figure of None is left out."""
        if not figures:
            return
        now = time.time() if at is None else at
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
            if memory is not None:
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
        """Every host each ``interval``; in between, a short tick gives young hosts their first figure."""
        next_round = time.monotonic() + self._interval
        while not self._closed.wait(min(FIRST_FIGURE_AFTER / 2, max(next_round - time.monotonic(), 0.0))):
            if time.monotonic() >= next_round:
                next_round = time.monotonic() + self._interval
                self.publish(self.sample())
            else:
                self.publish(self.sample(first_only=True))

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop sampling (waiting at most ``timeout`` seconds for a sample being sent; then a warning)."""
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning(
                    "utilisation metrics of %s: a sample was still being sent %.1f s after the close; going on",
                    self._job,
                    timeout,
                )
