"""Every wait on the offline endpoint's shutdown path is bounded, and a bound that passes is logged.

Each test makes one part not end (a thread held on an event, a lock held, a call that never answers),
checks that the waiting side goes on within its bound and says so, then lets the part go. Nothing
waits on elapsed time for its outcome: the tests wait for events, each wait with a deadline; the
only time figures are the bounds under test and a generous slack on top of them.
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.local_jobkit import BUCKET, pid_alive, put_source, request, unique, wait

from airflow_hetero import demo
from airflow_hetero.local import BatchOptions, LocalEndpoint, RunOptions
from airflow_hetero.local.api import server as server_module
from airflow_hetero.local.api import service as service_module
from airflow_hetero.local.api.service import SHUTDOWN_REASON, TrainingService
from airflow_hetero.local.batch.backend import BatchBackend
from airflow_hetero.local.host import shim
from airflow_hetero.local.host.process import HostProcess
from airflow_hetero.local.training.logship import LogShipper
from airflow_hetero.local.training.runner import JobRunner
from airflow_hetero.local.training.training_metrics import MetricMatcher
from airflow_hetero.local.training.utilisation import MetricsSampler

#: The longest any wait of these tests may take (an event that should come, a thread that should end).
DEADLINE = 60.0
#: What a loaded 2-core machine may add to a bound under test before the test calls it a hang.
SLACK = 20.0
#: The bound the tests give the part under test (short: it is always made to pass).
BOUND = 0.2
#: A pid no process has (above Linux's pid_max): what a fake descendant or entry point is called.
NO_PID = 1 << 23


def _warnings(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == logging.WARNING]


def _in_thread(work: Callable[[], Any]) -> Any:
    """Run ``work`` in a thread and wait for it with a deadline: a wait that is not bounded fails here."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()), daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert not thread.is_alive(), f"still waiting after {DEADLINE} s"
    return result[0]


# -- the batch queue thread ----------------------------------------------------------------------


class _NoTraining:
    """The queue's training jobs: never asked (its pass is replaced)."""

    def create(self, request: dict[str, Any], region: str) -> str:
        raise AssertionError("no attempt starts in this test")

    def describe(self, name: str) -> dict[str, Any] | None:
        return None

    def stop(self, name: str) -> None:
        return None


def test_a_queue_pass_that_does_not_end_is_logged_and_stop_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.batch.backend")
    backend = BatchBackend(tmp_path, _NoTraining(), BatchOptions(poll_interval=0.05))
    inside, release = threading.Event(), threading.Event()

    def stuck_pass() -> None:  # holds the queue's lock, as a pass does, and does not end
        with backend._lock:
            inside.set()
            release.wait(DEADLINE)

    monkeypatch.setattr(backend, "tick", stuck_pass)
    backend.start()
    thread = backend._thread
    assert thread is not None
    assert inside.wait(DEADLINE)
    try:
        started = time.monotonic()
        _in_thread(lambda: backend.stop(timeout=BOUND))
        took = time.monotonic() - started
    finally:
        release.set()
    assert took < BOUND + SLACK
    (said,) = _warnings(caplog, "airflow_hetero.local.batch.backend")
    assert "local-batch-queue" in said and f"did not end within {BOUND:.1f} s" in said
    thread.join(DEADLINE)  # the pass over, the thread sees the stop at once
    assert not thread.is_alive()


def test_a_queue_thread_that_ends_in_time_is_stopped_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.batch.backend")
    backend = BatchBackend(tmp_path, _NoTraining(), BatchOptions(poll_interval=30.0))
    backend.start()
    thread = backend._thread
    assert thread is not None
    _in_thread(lambda: backend.stop(timeout=DEADLINE))  # woken at once, not after its 30 s poll interval
    assert not thread.is_alive()
    assert _warnings(caplog, "airflow_hetero.local.batch.backend") == []


# -- the training service's shutdown -------------------------------------------------------------


class _Runner:
    """A job's runner as the service's shutdown sees it; ``ends``: whether its thread ends once aborted."""

    def __init__(self, name: str, *, ends: bool) -> None:
        self.name = name
        self.ends = ends
        self.aborted = threading.Event()
        self.killed = 0

    def abort(self, reason: str) -> None:
        self.aborted.set()

    def join(self, timeout: float | None = None) -> None:
        return None  # ended at once, or never: either way nothing to wait for here

    def is_alive(self) -> bool:
        return not (self.ends and self.aborted.is_set())

    def kill_hosts(self) -> list[Any]:
        self.killed += 1
        return []


def _record(name: str) -> dict[str, Any]:
    now = time.time()
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "SecondaryStatusTransitions": [{"Status": "Training", "StartTime": now, "StatusMessage": "Training"}],
        "CreationTime": now,
        "LastModifiedTime": now,
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/output"},
    }


def test_a_job_that_does_not_end_at_shutdown_is_killed_recorded_failed_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.api.service")
    monkeypatch.setattr(service_module, "SHUTDOWN_MARGIN", BOUND)
    service = TrainingService(tmp_path, options=RunOptions(stop_grace=BOUND))
    service.store.create(_record("stuck"))
    stuck = _Runner("stuck", ends=False)
    service._runners[service.store.key("stuck")] = stuck  # type: ignore[assignment]
    started = time.monotonic()
    _in_thread(service.shutdown)
    assert time.monotonic() - started < 2 * BOUND + SLACK
    assert stuck.aborted.is_set() and stuck.killed == 1
    record = service.store.get("stuck")
    assert record is not None
    assert (record["TrainingJobStatus"], record["FailureReason"]) == ("Failed", SHUTDOWN_REASON)
    assert _warnings(caplog, "airflow_hetero.local.api.service") == [
        "job stuck did not end in time at shutdown: killed 0 process(es)"
    ]


def test_shutdown_goes_on_when_the_service_lock_stays_held(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.api.service")
    monkeypatch.setattr(service_module, "SHUTDOWN_LOCK_TIMEOUT", BOUND)
    service = TrainingService(tmp_path, options=RunOptions(stop_grace=BOUND))
    ending = _Runner("ending", ends=True)
    service._runners["ending"] = ending  # type: ignore[assignment]
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # e.g. a create recording its job on a disk that does not answer
        with service._lock:
            held.set()
            release.wait(DEADLINE)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(DEADLINE)
    try:
        started = time.monotonic()
        _in_thread(service.shutdown)
        took = time.monotonic() - started
    finally:
        release.set()
    holder.join(DEADLINE)
    assert took < BOUND + SLACK
    assert ending.aborted.is_set() and ending.killed == 0  # the jobs known were ended all the same
    assert service._closing  # and no create is accepted any more
    (said,) = _warnings(caplog, "airflow_hetero.local.api.service")
    assert f"lock was still held after {BOUND:.1f} s" in said and "1 job(s)" in said


SLEEPER = "import time\ntime.sleep(300)\n"


@pytest.mark.slow
def test_a_runner_that_does_not_end_its_hosts_has_them_killed_and_the_job_failed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real job whose runner is stuck before it terminates its hosts: the service's last resort kills them."""
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.api.service")
    grace = 0.5
    monkeypatch.setattr(service_module, "SHUTDOWN_MARGIN", BOUND)
    stuck, killed = threading.Event(), threading.Event()
    terminate_all, kill_hosts = JobRunner._terminate_all, JobRunner.kill_hosts

    def stuck_terminate_all(self: JobRunner, *, release: bool = True) -> None:
        stuck.set()
        killed.wait(DEADLINE)  # until the endpoint's last resort has run
        terminate_all(self, release=release)

    def noted_kill_hosts(self: JobRunner) -> Any:
        try:
            return kill_hosts(self)
        finally:
            killed.set()

    monkeypatch.setattr(JobRunner, "_terminate_all", stuck_terminate_all)
    monkeypatch.setattr(JobRunner, "kill_hosts", noted_kill_hosts)
    endpoint = LocalEndpoint(workdir=tmp_path / "work", run=RunOptions(stop_grace=grace)).start()
    try:
        s3, sm = endpoint.client("s3"), endpoint.client("sagemaker")
        s3.create_bucket(Bucket=BUCKET)
        job = unique("stuck")
        sm.create_training_job(**request(job, put_source(s3, job, SLEEPER), max_runtime=600))
        wait(sm, job, secondary="Training", timeout=DEADLINE)
        hosts_file = endpoint.job_dir(job) / "hosts.json"
        deadline = time.monotonic() + DEADLINE
        while not hosts_file.exists() or len(json.loads(hosts_file.read_text())) < 3:
            assert time.monotonic() < deadline, "the job's hosts did not start"
            time.sleep(0.05)
        pids = [h["pid"] for h in json.loads(hosts_file.read_text())]
        runner = endpoint.service._runners[endpoint.service.store.key(job)]

        started = time.monotonic()
        _in_thread(endpoint.service.shutdown)  # the server still answers: the runner can finish after it
        took = time.monotonic() - started
        assert stuck.is_set() and killed.is_set()
        assert took < grace + BOUND + SLACK
        record = endpoint.service.store.get(job)
        assert record is not None
        assert (record["TrainingJobStatus"], record["FailureReason"]) == ("Failed", SHUTDOWN_REASON)
        (said,) = _warnings(caplog, "airflow_hetero.local.api.service")
        assert said.startswith(f"job {job} did not end in time at shutdown: killed ")
        assert int(said.rsplit("killed ", 1)[1].split()[0]) >= len(pids)  # the shims, and their entry points
        deadline = time.monotonic() + DEADLINE
        while any(pid_alive(pid) for pid in pids):
            assert time.monotonic() < deadline, [pid for pid in pids if pid_alive(pid)]
            time.sleep(0.05)
        runner.join(DEADLINE)  # released, it ends its (dead) hosts and records its own ending
        assert not runner.is_alive()
    finally:
        killed.set()
        endpoint.stop()


# -- the endpoint's serving thread ---------------------------------------------------------------


def test_a_serving_thread_that_does_not_end_is_logged_and_stop_returns(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.api.server")
    monkeypatch.setattr(server_module, "SERVER_STOP_TIMEOUT", BOUND)
    endpoint = LocalEndpoint().start()
    server, serving = endpoint._server, endpoint._thread
    assert serving is not None
    shutdown = server.shutdown
    monkeypatch.setattr(server, "shutdown", lambda: None)  # the serving thread is never asked to end
    try:
        started = time.monotonic()
        _in_thread(endpoint.stop)
        took = time.monotonic() - started
        assert serving.is_alive()
    finally:
        threading.Thread(target=shutdown, daemon=True).start()
        serving.join(DEADLINE)
    assert not serving.is_alive()
    assert took < BOUND + SLACK
    assert _warnings(caplog, "airflow_hetero.local.api.server") == [
        f"the endpoint's serving thread did not end within {BOUND:.1f} s of the stop; closing its socket"
    ]


# -- a job's log shipping and metrics threads ----------------------------------------------------


class _StuckClient:
    """CloudWatch (Logs): the first put never answers until released; the others are kept."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.calls: list[dict[str, Any]] = []

    def put_log_events(self, **kwargs: Any) -> None:
        self._put(kwargs)

    def put_metric_data(self, **kwargs: Any) -> None:
        self._put(kwargs)

    def _put(self, kwargs: dict[str, Any]) -> None:
        self.calls.append(kwargs)
        if len(self.calls) == 1:
            self.entered.set()
            self.release.wait(DEADLINE)


def _close_while_stuck(
    client: _StuckClient, thread: threading.Thread, close: Callable[[float], None], after: Callable[[], None]
) -> float:
    """Wait until ``thread`` is stuck in its first put, queue more (``after``), close; seconds the close took."""
    assert client.entered.wait(DEADLINE)
    after()
    try:
        started = time.monotonic()
        _in_thread(lambda: close(BOUND))
        return time.monotonic() - started
    finally:
        client.release.set()
        thread.join(DEADLINE)
        assert not thread.is_alive()


def test_log_shipping_stuck_in_a_put_is_logged_and_what_is_queued_still_goes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.training.logship")
    client = _StuckClient()
    shipper = LogShipper(client, interval=0.01)
    shipper.emit("job/algo-1", "before", 1)
    shipper.start()
    took = _close_while_stuck(client, shipper._thread, shipper.close, lambda: shipper.emit("job/algo-1", "after", 2))
    assert took < BOUND + SLACK
    assert _warnings(caplog, "airflow_hetero.local.training.logship") == [
        f"log shipping: a batch was still being sent {BOUND:.1f} s after the close; going on"
    ]
    assert [[e["message"] for e in call["logEvents"]] for call in client.calls] == [["before"], ["after"]]


def test_training_metrics_stuck_in_a_put_are_logged_and_what_is_queued_still_goes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.training.training_metrics")
    client = _StuckClient()
    matcher = MetricMatcher(client, "job", [{"Name": "loss", "Regex": "loss=([0-9.]+)"}], interval=0.01)
    matcher.observe("loss=2.0", 1000)
    matcher.start()
    took = _close_while_stuck(client, matcher._thread, matcher.close, lambda: matcher.observe("loss=1.0", 2000))
    assert took < BOUND + SLACK
    assert _warnings(caplog, "airflow_hetero.local.training.training_metrics") == [
        f"training metrics of job: a batch was still being put {BOUND:.1f} s after the close; going on"
    ]
    assert [[d["Value"] for d in call["MetricData"]] for call in client.calls] == [[2.0], [1.0]]


def test_utilisation_sampling_stuck_in_a_put_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.training.utilisation")
    client = _StuckClient()
    sampler = MetricsSampler(client, "job", interval=0.01)
    sampler.watch("algo-1", os.getpid())  # running long enough for its first figure at once
    sampler.start()
    took = _close_while_stuck(client, sampler._thread, sampler.close, lambda: None)
    assert took < BOUND + SLACK
    assert _warnings(caplog, "airflow_hetero.local.training.utilisation") == [
        f"utilisation metrics of job: a sample was still being sent {BOUND:.1f} s after the close; going on"
    ]


# -- a host's output and the host shim -----------------------------------------------------------


def test_a_host_output_still_open_is_logged_and_the_drain_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_hetero.local.host.process")
    host = HostProcess(
        "algo-1", ["true"], env={}, cwd=tmp_path, log_file=tmp_path / "algo-1.log", sink=lambda line, ms: None
    )
    release = threading.Event()
    reader = threading.Thread(target=lambda: release.wait(DEADLINE), daemon=True)  # a pipe a process out of reach holds
    reader.start()
    host._readers.append(reader)
    try:
        drained = _in_thread(lambda: host.join_output(BOUND))
    finally:
        release.set()
        reader.join(DEADLINE)
    assert drained is False
    assert _warnings(caplog, "airflow_hetero.local.host.process") == [
        f"host algo-1: its output was still open {BOUND:.1f} s after it was ended"
    ]


def test_the_shim_names_what_outlives_its_sigkill_and_returns(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shim, "descendants", lambda root: [NO_PID])  # a process stuck in the kernel
    monkeypatch.setattr(shim, "signal_all", lambda signum, pids=None: None)
    monkeypatch.setattr(shim, "reap", lambda: None)
    _in_thread(lambda: shim.kill_all(wait=BOUND))
    assert f"hostshim: 1 process(es) still there {BOUND:.1f} s after SIGKILL, left behind: [{NO_PID}]" in (
        capfd.readouterr().err
    )


def test_the_shim_gives_up_on_an_entry_point_never_reaped_after_its_kill(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    kills: list[float] = []
    monkeypatch.setattr(shim, "_received", [signal.SIGTERM])  # the stop came
    monkeypatch.setattr(shim, "_reaped", {})
    monkeypatch.setattr(shim, "reap", lambda: None)  # and the entry point never goes
    monkeypatch.setattr(shim, "signal_all", lambda signum, pids=None: None)
    monkeypatch.setattr(shim, "kill_all", lambda wait=shim.KILL_WAIT: kills.append(wait))
    monkeypatch.setattr(shim, "KILL_WAIT", BOUND)
    status, _ = _in_thread(lambda: shim.supervise(NO_PID, grace=BOUND))
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL  # reported as killed, as it was
    assert kills  # it was killed before it was given up on
    assert f"hostshim: entry point {NO_PID} still not gone {BOUND:.1f} s after it was killed" in (
        capfd.readouterr().err
    )


# -- the demo --------------------------------------------------------------------------------------


def test_the_demo_kills_a_db_migration_that_does_not_end_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hanging = tmp_path / "python"  # what `python -m airflow db migrate` runs: a migration that never ends
    hanging.write_text("#!/bin/sh\nexec sleep 300\n")
    hanging.chmod(hanging.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sys, "executable", str(hanging))
    out, err = io.StringIO(), io.StringIO()
    term = demo.Terminal(out, err, None)
    started = time.monotonic()
    ok = _in_thread(lambda: demo.migrate_db(term, timeout=1.0))
    assert time.monotonic() - started < 1.0 + SLACK
    assert ok is False
    assert "demo: `airflow db migrate` did not end within 1 s and was killed" in err.getvalue()
