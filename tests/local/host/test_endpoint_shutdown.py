"""Ending ``airflow-hetero local serve`` with jobs running, on a machine whose every core is busy.

Ctrl-C, repeated, while clients keep the server busy: every process the hosts started ends (also
ones in new sessions, double-forked daemons and processes deaf to SIGTERM), and the endpoint is
gone within the bound each time. SIGKILL of the endpoint: its hosts end by themselves within the
grace, and the next ``serve`` on the workdir reports the job; what a crash still left running (the
shims killed too) is killed by the next ``serve``, which says so.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.child_output import ChildOutput, wait_exit
from support.cpu_load import cpu_burners, default_count
from support.local_jobkit import BUCKET, put_source, request, unique
from support.serve_process import alive, host_pids, recorded_pids, serve

from airflow_hetero.local.api.server import SERVER_STOP_TIMEOUT
from airflow_hetero.local.api.service import SHUTDOWN_MARGIN
from airflow_hetero.local.host.process import KILL_WAIT, kill_tree
from airflow_hetero.local.training.clients import DEFAULT_REGION, FAKE_ACCESS_KEY, FAKE_SECRET_KEY, make_client

pytestmark = pytest.mark.slow

#: The grace the endpoints of these tests run with (``--stop-grace``), shorter than the default 5 s.
GRACE = 1.0
#: Every host process is gone this long after the stop begins: the grace, then the kill (the shim's own
#: bound: its endpoint may be gone).
HOSTS_BOUND = GRACE + KILL_WAIT
#: What 2 cores kept busy by the burners add to the kill (the shims and the endpoint wait for the
#: CPU, and so does this test's polling): up to 2.0 s seen in the full suite on a CI-shaped machine;
#: the allowance is twice that. A host left behind or a hang (what the old code did) still fails.
SCHEDULING = 4.0
#: ``stop()`` returns within this: the jobs get GRACE + SHUTDOWN_MARGIN, the server thread the rest.
BOUND = GRACE + SHUTDOWN_MARGIN + SERVER_STOP_TIMEOUT
#: The load SCHEDULING was measured at: the burners and this test.
CALIBRATED_LOAD = default_count() + 1


def load_slack() -> float:
    """SCHEDULING scaled by how much busier the machine is than it was calibrated at (``make test`` runs
    both suites on several workers each beside this test: 9.8 and 10.6 s were seen for a 7-s bound at a
    load near 12). A host left behind or a hang still fails: the wait gives up at BOUND + TEARDOWN."""
    return SCHEDULING * max(1.0, os.getloadavg()[0] / CALIBRATED_LOAD)
#: The interpreter's own teardown after that (not bounded by the endpoint; seconds on a busy machine).
TEARDOWN = 20.0
#: How long a killed endpoint may take to be gone (SIGKILL: only a loaded machine delays it).
KILLED_TIMEOUT = 30.0
ROUNDS = 10
GROUPS = (("data", "ml.c5.xlarge", 1), ("dnn", "ml.p3.2xlarge", 1))
HOSTS = 2
PER_HOST = 3  # processes each host's script records (itself, a new-session child, a daemon)

ESCAPING_HOST = """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a stubborn entry point: only SIGKILL ends it
    pids = [os.getpid()]
    # a child in a session of its own (outside the host's process group), also deaf to SIGTERM
    deaf = ["/bin/sh", "-c", "trap '' TERM; exec sleep 300"]
    pids.append(subprocess.Popen(deaf, start_new_session=True).pid)
    read, write = os.pipe()
    if os.fork() == 0:  # a classic daemon: fork, setsid, fork again, the middle one exits
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.write(write, f"{os.getpid()}\\n".encode())
            time.sleep(300)
        os._exit(0)
    pids.append(int(os.read(read, 64).decode()))
    with open(os.environ["PIDS_FILE"], "a") as f:
        f.write(" ".join(map(str, pids)) + "\\n")
    time.sleep(300)
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """The endpoints' workdir; whatever a failing test leaves of its hosts is killed afterwards."""
    yield tmp_path / "workdir"
    kill_tree(root=tmp_path)


def _start_jobs(url: str, pids_file: Path, count: int) -> list[str]:
    """Create ``count`` jobs of escaping hosts; return their names once every process is recorded."""
    s3, sm = make_client("s3", url), make_client("sagemaker", url)
    s3.create_bucket(Bucket=BUCKET)
    jobs = [unique("shutdown") for _ in range(count)]
    for job in jobs:
        body: dict[str, Any] = request(job, put_source(s3, job, ESCAPING_HOST), max_runtime=600, groups=GROUPS)
        body["Environment"] = {"PIDS_FILE": str(pids_file)}
        sm.create_training_job(**body)
    deadline = time.monotonic() + 120
    while len(recorded_pids(pids_file)) < count * HOSTS * PER_HOST:
        assert time.monotonic() < deadline, recorded_pids(pids_file)
        time.sleep(0.1)
    return jobs


def _busy_client(url: str) -> Any:
    """A SageMaker client of the endpoint that sends each call once: the busy threads' own loop is the retry.
    (With :func:`make_client`'s retries, a call in flight when the endpoint goes away backs off and retries
    for seconds, and the round waited that long for its threads after the endpoint had exited.)"""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id=FAKE_ACCESS_KEY, aws_secret_access_key=FAKE_SECRET_KEY, region_name=DEFAULT_REGION
    )
    return session.client("sagemaker", endpoint_url=url, config=Config(retries={"total_max_attempts": 1}))


@contextmanager
def _busy(url: str, threads: int = 4) -> Iterator[None]:
    """Client threads calling ListTrainingJobs without a pause: the server starts a thread per request."""
    stop = threading.Event()

    def call() -> None:
        sm = _busy_client(url)
        while not stop.is_set():
            try:
                sm.list_training_jobs()
            except Exception:  # the endpoint is going away: no tight loop of refused connections
                stop.wait(0.1)

    workers = [threading.Thread(target=call, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)


def _records(workdir: Path, jobs: list[str]) -> list[dict[str, Any]]:
    return [json.loads((workdir / "jobs" / job / "job.json").read_text()) for job in jobs]


def _ctrl_c(proc: subprocess.Popen[str], output: ChildOutput, pids: list[int]) -> tuple[float, float, float | None]:
    """SIGINT ``local serve``; (seconds until every pid is gone, until it printed ``stopped.`` (or its
    output ended, or ``BOUND + TEARDOWN`` passed), until it exited; None if it had not exited
    ``BOUND + TEARDOWN`` seconds after)."""
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    while alive(pids) and time.monotonic() < started + BOUND + TEARDOWN:
        time.sleep(0.02)
    hosts_gone = time.monotonic() - started
    # until "stopped." or the end of its output; a serve that does neither is left to the wait below
    output.look_for(lambda line: line.startswith("stopped."), max(0.0, started + BOUND + TEARDOWN - time.monotonic()))
    stopped = time.monotonic() - started
    try:
        proc.wait(timeout=max(0.1, started + BOUND + TEARDOWN - time.monotonic()))
    except subprocess.TimeoutExpired:
        return hosts_gone, stopped, None
    return hosts_gone, stopped, time.monotonic() - started


@pytest.mark.parametrize("attempt", range(ROUNDS))
def test_ctrl_c_under_load_ends_every_host_within_the_bound(workdir: Path, tmp_path: Path, attempt: int) -> None:
    pids_file = tmp_path / "pids"
    proc, url, _, output = serve(workdir, "--stop-grace", str(GRACE))
    try:
        jobs = _start_jobs(url, pids_file, count=2)
        pids = recorded_pids(pids_file) + [pid for job in jobs for pid in host_pids(workdir, job)]
        assert alive(pids) == pids
        # the load is on for the stop (the burners, then the client threads, as before): starting the endpoint
        # and its hosts under it only made each round longer, and took the cores from the suite's other tests
        with cpu_burners(), _busy(url):
            time.sleep(0.5)
            hosts_gone, stopped, exited = _ctrl_c(proc, output, pids)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=KILLED_TIMEOUT)
    left = alive(pids)
    print(
        f"\nround {attempt}: hosts gone after {hosts_gone:.2f} s, stopped after {stopped:.2f} s, exited after "
        f"{exited if exited is None else round(exited, 2)} s; processes left: {len(left)} of {len(pids)}"
    )
    assert exited is not None, f"the endpoint was still running {BOUND + TEARDOWN:.0f} s after SIGINT"
    assert left == []
    slack = load_slack()
    assert hosts_gone < HOSTS_BOUND + slack, f"bound {HOSTS_BOUND + slack:.1f} s at load {os.getloadavg()[0]:.1f}"
    assert stopped < BOUND + slack - SCHEDULING, f"bound {BOUND + slack - SCHEDULING:.1f} s"
    records = _records(workdir, jobs)
    assert [r["TrainingJobStatus"] for r in records] == ["Failed", "Failed"]
    assert all("shut down while the job was running" in r["FailureReason"] for r in records)


def _tgkill(pid: int, tid: int, signum: int) -> None:
    """Send ``signum`` to thread ``tid`` of process ``pid`` (Linux; skips the test elsewhere)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "tgkill"):
        pytest.skip("no tgkill here")
    assert libc.tgkill(pid, tid, signum) == 0, os.strerror(ctypes.get_errno())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads are listed from /proc")
def test_ctrl_c_delivered_to_another_thread_stops_serve(workdir: Path) -> None:
    """The kernel may hand a process's SIGINT to any thread: the main thread must still act on it."""
    proc, url, _, _ = serve(workdir, "--stop-grace", str(GRACE))
    try:
        make_client("sagemaker", url).list_training_jobs()  # the server's threads are up
        others = sorted(int(tid) for tid in os.listdir(f"/proc/{proc.pid}/task") if int(tid) != proc.pid)
        assert others
        started = time.monotonic()
        _tgkill(proc.pid, others[0], signal.SIGINT)
        code = proc.wait(timeout=BOUND + TEARDOWN)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=KILLED_TIMEOUT)
    print(f"\nstopped {took:.2f} s after a SIGINT delivered to thread {others[0]}")
    assert code == 0


def test_sigkill_of_the_endpoint_ends_its_hosts_within_the_grace(workdir: Path, tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    proc, url, _, _ = serve(workdir, "--stop-grace", str(GRACE))
    try:
        (job,) = _start_jobs(url, pids_file, count=1)
        pids = recorded_pids(pids_file) + host_pids(workdir, job)
        assert alive(pids) == pids
    except BaseException:
        proc.kill()
        proc.wait(timeout=KILLED_TIMEOUT)
        raise
    with cpu_burners():  # the load is on from the kill until the hosts are gone
        proc.kill()  # no chance to clean up: the shims notice their parent is gone
        proc.wait(timeout=KILLED_TIMEOUT)
        killed = time.monotonic()
        while alive(pids) and time.monotonic() < killed + 30:
            time.sleep(0.05)
        took = time.monotonic() - killed
    print(f"\nhosts gone {took:.2f} s after the endpoint's SIGKILL; processes left: {len(alive(pids))} of {len(pids)}")
    assert alive(pids) == []
    assert took < HOSTS_BOUND + load_slack()

    again, _, lines, _ = serve(workdir)
    again.send_signal(signal.SIGINT)
    assert wait_exit(again, 30, "the next serve exited on SIGINT") == 0
    assert f"1 job(s) left running by a previous endpoint were marked Failed: {job}" in lines
    assert not any(line.startswith("killed ") for line in lines)  # nothing was left to kill
    (record,) = _records(workdir, [job])
    assert record["FailureReason"] == (
        "InternalServerError: The local endpoint was restarted while the job was InProgress (Training); "
        "host processes algo-1, algo-2 were already gone. The job cannot be resumed."
    )


def test_the_next_serve_kills_what_a_crash_left_running(workdir: Path, tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    proc, url, _, _ = serve(workdir, "--stop-grace", str(GRACE))
    try:
        (job,) = _start_jobs(url, pids_file, count=1)
        shims = host_pids(workdir, job)
        for shim in shims:  # frozen: they cannot act on their parent's death
            os.kill(shim, signal.SIGSTOP)
    finally:
        proc.kill()
        proc.wait(timeout=KILLED_TIMEOUT)
    for shim in shims:  # a crash that took the shims too: their processes now belong to init
        os.kill(shim, signal.SIGKILL)
    pids = recorded_pids(pids_file)
    time.sleep(GRACE + 0.5)
    assert alive(pids) == pids

    again, _, lines, _ = serve(workdir)
    again.send_signal(signal.SIGINT)
    assert wait_exit(again, 30, "the next serve exited on SIGINT") == 0
    assert alive(pids) == []
    (report,) = [line for line in lines if line.startswith("killed ")]
    assert report.startswith(f"killed {len(pids)} process(es) a previous endpoint's hosts left running: ")
    for pid in pids:
        assert f"{pid} " in report
    assert f"({job} algo-1)" in report and f"({job} algo-2)" in report
    (record,) = _records(workdir, [job])
    assert record["FailureReason"] == (
        "InternalServerError: The local endpoint was restarted while the job was InProgress (Training); "
        f"host processes algo-1, algo-2 were already gone; {len(pids)} other process(es) its hosts "
        "had started were still running and were killed. The job cannot be resumed."
    )
