"""Metrics sampling and log shipping on their own, with real processes and recording clients."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero.local.host.process import HostProcess, HostUsage
from airflow_hetero.local.training.logship import LOG_GROUP, LogShipper, stream_name
from airflow_hetero.local.training.utilisation import FIRST_FIGURE_AFTER, MIN_FINAL_SPAN, NAMESPACE, MetricsSampler

#: How long a child the test killed (or that has already exited) may take to be reaped.
EXIT_TIMEOUT = 30.0


class _Recorder:
    """Stands in for a boto3 client: records calls by operation name."""

    class exceptions:  # mirrors boto3 client.exceptions
        class ResourceAlreadyExistsException(Exception):
            pass

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.delay = delay  # seconds each call takes

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> dict[str, Any]:
            time.sleep(self.delay)
            self.calls.append((name, kwargs))
            return {}

        return call


def test_sampler_measures_a_busy_host_and_its_children() -> None:
    busy = (
        "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'while True: pass'])\ntime.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", busy], start_new_session=True)
    try:
        cloudwatch = _Recorder()
        sampler = MetricsSampler(cloudwatch, "job-1", interval=60)
        sampler.watch("algo-2", proc.pid)
        time.sleep(0.3)
        found = _Sampled(sampler, proc.pid)  # the spinning child is found
        time.sleep(0.6)
        later = _Sampled(sampler, proc.pid)
        sampler.publish(later.figures)
        cpu, memory = later.figures["algo-2"]
        # the tree's CPU seconds between the two figures over the time between them: the leader
        # sleeps, so all of it is the spinning child's (leaving the child out gives about 0)
        assert cpu > 0
        assert later.busy_since_at_least(found) <= cpu <= later.busy_since_at_most(found)
        assert memory is not None and 0 < memory < 100
        ((name, call),) = cloudwatch.calls
        assert name == "put_metric_data"
        assert call["Namespace"] == NAMESPACE == "/aws/sagemaker/TrainingJobs"
        assert {d["MetricName"] for d in call["MetricData"]} == {"CPUUtilization", "MemoryUtilization"}
        assert all(d["Dimensions"] == [{"Name": "Host", "Value": "job-1/algo-2"}] for d in call["MetricData"])
        sampler.unwatch("algo-2")
        assert sampler.sample() == {}
    finally:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=EXIT_TIMEOUT)


def test_shipper_batches_in_order_and_drops_empty_lines() -> None:
    logs = _Recorder()
    shipper = LogShipper(logs, interval=60)
    stream = stream_name("job-1", "algo-1", 1_700_000_000)
    assert stream == "job-1/algo-1-1700000000"
    shipper.open_stream(stream)
    shipper.emit(stream, "second", 2000)
    shipper.emit(stream, "", 1500)
    shipper.emit(stream, "first", 1000)
    shipper.close()
    names = [name for name, _ in logs.calls]
    assert names == ["create_log_group", "create_log_stream", "put_log_events"]
    put = logs.calls[-1][1]
    assert put["logGroupName"] == LOG_GROUP
    assert [e["message"] for e in put["logEvents"]] == ["first", "second"]


def test_shipper_splits_large_batches() -> None:
    logs = _Recorder()
    shipper = LogShipper(logs, interval=60)
    shipper.open_stream("s")
    for i in range(25_000):
        shipper.emit("s", f"line {i}", 1000 + i)
    shipper.flush()
    puts = [call for name, call in logs.calls if name == "put_log_events"]
    assert [len(p["logEvents"]) for p in puts] == [10_000, 10_000, 5_000]
    assert puts[2]["logEvents"][-1]["message"] == "line 24999"


MB = 1024 * 1024
SPIN = "import time\nt = time.time()\nwhile time.time() - t < {seconds}: pass\n"


def _created(pid: int) -> float:
    """When ``pid`` started, as psutil (and so the sampler) sees it."""
    import psutil

    return float(psutil.Process(pid).create_time())


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants (with reaped children), read from the kernel."""
    import psutil

    leader = psutil.Process(pid)
    total = 0.0
    for proc in [leader, *leader.children(recursive=True)]:
        times = proc.cpu_times()
        total += times.user + times.system + times.children_user + times.children_system
    return total


class _Sampled:
    """One ``sampler.sample()`` with the host tree's CPU seconds and the clock read just before and
    after it: the figure the sampler computed must lie between the bounds these give."""

    def __init__(self, sampler: MetricsSampler, pid: int) -> None:
        self.created = _created(pid)
        self.cpu_before, self.before = _tree_cpu(pid), time.time()
        self.figures = sampler.sample()
        self.cpu_after, self.after = _tree_cpu(pid), time.time()

    def busy_since_start_at_least(self) -> float:
        return 100 * self.cpu_before / (self.after - self.created) - 0.01

    def busy_since_start_at_most(self) -> float:
        return 100 * self.cpu_after / (self.before - self.created) + 0.01

    def busy_since_at_least(self, earlier: _Sampled) -> float:
        return 100 * (self.cpu_before - earlier.cpu_after) / (self.after - earlier.before) - 0.01

    def busy_since_at_most(self, earlier: _Sampled) -> float:
        return 100 * (self.cpu_after - earlier.cpu_before) / (self.before - earlier.after) + 0.01


def _puts(cloudwatch: _Recorder) -> list[dict[str, float]]:
    """Each put_metric_data call as metric name -> value (one host per call in these tests)."""
    return [{d["MetricName"]: d["Value"] for d in call["MetricData"]} for name, call in cloudwatch.calls]


def _stamps(cloudwatch: _Recorder) -> list[float]:
    return [call["MetricData"][0]["Timestamp"] for _, call in cloudwatch.calls]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Any]:
    """Make HostProcess objects in tmp_path; every one still running at the end is killed."""
    made: list[HostProcess] = []

    def make(code: str, name: str = "algo-1") -> HostProcess:
        proc = HostProcess(
            name,
            [sys.executable, "-c", code],
            env=dict(os.environ),
            cwd=tmp_path,
            log_file=tmp_path / f"{name}.log",
            sink=lambda line, stamp: None,
        )
        made.append(proc)
        return proc

    yield make
    for proc in made:
        proc.terminate(0.1)


def _wait_exit(proc: HostProcess, timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    while (code := proc.poll()) is None:
        assert time.monotonic() < deadline, "host did not exit"
        time.sleep(0.02)
    return code


def test_first_figure_is_the_cpu_since_start_not_a_priming_zero() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=30)], start_new_session=True)
    try:
        sampler = MetricsSampler(_Recorder(), "job-1", interval=60)
        sampler.watch("algo-1", proc.pid)
        time.sleep(0.5)
        sampled = _Sampled(sampler, proc.pid)
        cpu, memory = sampled.figures["algo-1"]
        # its CPU seconds since it started over its age (the old sampler's first figure was 0.0);
        # how much of a core it gets depends on the machine's load, so no fixed floor
        assert cpu > 0
        assert sampled.busy_since_start_at_least() <= cpu <= sampled.busy_since_start_at_most()
        assert memory is not None and memory > 0
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=EXIT_TIMEOUT)


# Spins ``before`` CPU seconds, says so, waits for the release file, then spins ``after`` more: the
# test takes the first figure in between, so each span holds CPU whatever share of a core it gets.
SPIN_AROUND_A_RELEASE = (
    "import os, time\n"
    "def spin(seconds):\n"
    "    t = time.process_time()\n"
    "    while time.process_time() - t < seconds: pass\n"
    "spin({before}); open({spun!r}, 'w').close()\n"
    "while not os.path.exists({release!r}): time.sleep(0.005)\n"
    "spin({after})\n"
)


def _wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_host_shorter_than_the_interval_gets_a_first_and_a_last_figure(host: Any, tmp_path: Path) -> None:
    cloudwatch = _Recorder()
    sampler = MetricsSampler(cloudwatch, "job-1", interval=60)  # no interval figure while it runs
    spun, release = tmp_path / "spun", tmp_path / "release"
    proc = host(SPIN_AROUND_A_RELEASE.format(before=0.15, after=0.2, spun=str(spun), release=str(release)))
    started = time.time()
    sampler.watch("algo-1", proc.start())
    created = _created(proc.pid)  # the first figure counts from here, as the sampler does
    # the sampler's own loop takes the first figure, but only once the host has used CPU, and the host
    # uses more only after that figure is out: no span depends on how a loaded machine schedules them
    _wait_for(spun.exists, "the host's first CPU")
    sampler.start()
    _wait_for(lambda: cloudwatch.calls, "the first figure")
    release.touch()
    assert _wait_exit(proc, timeout=60) == 0
    usage = proc.usage
    assert usage is not None and started <= usage.ended <= time.time()
    assert 0.35 <= usage.cpu_seconds <= usage.ended - created  # one spinning thread: at most its lifetime
    sampler.finish("algo-1", usage)
    sampler.close()
    first, last = _puts(cloudwatch)
    assert set(first) == {"CPUUtilization", "MemoryUtilization"} and first["MemoryUtilization"] > 0
    assert set(last) == {"CPUUtilization"}  # the kernel's account has no trustworthy peak memory
    assert first["CPUUtilization"] > 0 and last["CPUUtilization"] > 0
    first_at, last_at = _stamps(cloudwatch)
    # counted from the process start as the sampler sees it (psutil create_time, which may lag or lead
    # time.time() by a few ms), not from the wall clock before Popen
    assert first_at - created >= FIRST_FIGURE_AFTER - 0.01 and last_at == usage.ended
    # each figure is the CPU of its span over the span (start -> first, first -> end), so together
    # they account for the CPU seconds the kernel reported, whatever share of a core the host got
    accounted = (first["CPUUtilization"] * (first_at - created) + last["CPUUtilization"] * (last_at - first_at)) / 100
    assert accounted == pytest.approx(usage.cpu_seconds, abs=0.03)


def test_host_ending_before_its_first_figure_reports_cpu_and_its_peak_memory(host: Any) -> None:
    import psutil

    cloudwatch = _Recorder()
    sampler = MetricsSampler(cloudwatch, "job-1", interval=60)
    ballast = b"\x01" * (300 * MB)  # the endpoint's own size must not show as the host's (fork/exec carry it)
    proc = host(f"b = bytearray({64 * MB})")
    sampler.watch("algo-1", proc.start())
    # not polled yet: the exited host stays a zombie, as between two polls of the runner
    deadline = time.monotonic() + 20
    while _status(proc.pid) != "zombie":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert sampler.sample() == {}  # an exited (unreaped) host gives no figure: it has no memory left
    assert _wait_exit(proc) == 0
    del ballast
    usage = proc.usage
    assert usage is not None and usage.peak_rss is not None
    assert 64 * MB <= usage.peak_rss < 64 * MB + 60 * MB  # the script's array plus an interpreter
    sampler.finish("algo-1", usage)
    ((figure,),) = [_puts(cloudwatch)]
    assert set(figure) == {"CPUUtilization", "MemoryUtilization"} and figure["CPUUtilization"] >= 0
    total = psutil.virtual_memory().total
    assert figure["MemoryUtilization"] == pytest.approx(100 * usage.peak_rss / total, abs=0.001)
    sampler.finish("algo-1", proc.usage)  # only once
    assert len(cloudwatch.calls) == 1


def test_a_host_killed_before_the_shim_wrote_its_peak_has_no_peak(host: Any) -> None:
    proc = host("import time; time.sleep(30)")
    proc.start()
    proc.kill()
    assert _wait_exit(proc) != 0
    assert proc.usage is not None and proc.usage.peak_rss is None
    assert not proc.peak_rss_file.exists()


def _status(pid: int) -> str:
    import psutil

    return str(psutil.Process(pid).status())


@pytest.mark.parametrize("put_delay", [0.0, MIN_FINAL_SPAN], ids=["prompt-put", "slow-put"])
def test_finish_without_usage_or_right_after_a_figure_puts_nothing(host: Any, put_delay: float) -> None:
    cloudwatch = _Recorder(delay=put_delay)  # slow-put: a figure takes a while to put (or the test is preempted)
    sampler = MetricsSampler(cloudwatch, "job-1", interval=60)
    proc = host("import time; time.sleep(30)")
    sampler.watch("algo-1", proc.start())
    sampler.watch("algo-2", proc.pid)
    sampler.finish("algo-1", None)  # reaped elsewhere: no account, no figure
    sampler.finish("algo-9", HostUsage(cpu_seconds=1.0, ended=time.time()))  # never watched
    assert cloudwatch.calls == []
    time.sleep(0.2)
    sampled = time.time()  # the figure's time is at least this
    figures = sampler.sample()
    assert set(figures) == {"algo-2"}  # algo-1 is no longer watched
    sampler.publish(figures)
    sampler.finish("algo-2", HostUsage(cpu_seconds=1.0, ended=sampled + MIN_FINAL_SPAN / 2))
    assert len(cloudwatch.calls) == 1  # a last figure over a few ms would be noise


def test_a_failing_cloudwatch_does_not_stop_the_sampler(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def put_metric_data(self, **kwargs: Any) -> None:
            raise RuntimeError("endpoint gone")

    sampler = MetricsSampler(Broken(), "job-1", interval=60)
    sampler.publish({"algo-1": (50.0, None)})
    assert "could not put metrics for job-1" in caplog.text


def test_host_process_keeps_the_exit_code_and_usage_of_every_ending(host: Any) -> None:
    failing = host("import sys; sys.exit(3)")
    failing.start()
    assert _wait_exit(failing) == 3 and failing.usage is not None
    assert failing.proc.wait(timeout=EXIT_TIMEOUT) == 3  # Popen sees the code wait4 collected

    stopped = host("import time; time.sleep(30)", name="algo-2")
    stopped.start()
    time.sleep(0.2)
    stopped.terminate(grace=5.0)
    assert stopped.poll() == -signal.SIGTERM and stopped.usage is not None

    stubborn = host(
        "import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
        "time.sleep(30)",
        name="algo-3",
    )
    stubborn.start()
    deadline = time.monotonic() + 20
    while not stubborn.error_tail():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    stubborn.terminate(grace=0.2)
    assert stubborn.poll() == -signal.SIGKILL and stubborn.usage is not None



class _ExitingProcess:
    """A host process that exits between the sampler's status check and its memory read."""

    def status(self) -> str:
        return "running"

    def children(self, recursive: bool = False) -> list[Any]:
        return []

    def cpu_times(self) -> Any:
        return type("Times", (), {"user": 0.1, "system": 0.05})()

    def memory_info(self) -> Any:
        import psutil

        raise psutil.NoSuchProcess(4242)


def test_a_host_exiting_during_a_sample_gives_no_figure_so_finish_puts_its_peak() -> None:
    """A figure read from a tree that just exited would say 0 % memory and keep ``finish`` from putting the
    host's peak: the summary's memory average of a short job read 0 (seen under load)."""
    cloudwatch = _Recorder()
    sampler = MetricsSampler(cloudwatch, "job-1", interval=60)
    sampler.watch("algo-1", os.getpid())
    with sampler._lock:
        sampler._hosts["algo-1"].process = _ExitingProcess()
    assert sampler.sample() == {}
    sampler.finish("algo-1", HostUsage(cpu_seconds=0.2, ended=time.time(), peak_rss=50 * MB))
    ((figure,),) = [_puts(cloudwatch)]
    assert figure["MemoryUtilization"] > 0
