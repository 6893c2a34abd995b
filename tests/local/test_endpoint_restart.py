"""Job state across endpoint restarts, clean shutdowns and crashes; the ``local serve`` command."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.late_kills import late_kills
from support.local_jobkit import BUCKET, pid_alive, put_source, request, unique, wait
from support.serve_process import Served, serve

from airflow_hetero.local import LocalEndpoint, RunOptions
from airflow_hetero.local.cli import register
from airflow_hetero.local.training.clients import make_client

pytestmark = pytest.mark.slow

SLEEPER = "import time\ntime.sleep(60)\n"
#: How long a stopping (or killed) ``local serve`` may take to exit, and then to close its output.
EXIT_TIMEOUT = 30


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    workdir = tmp_path / "work"
    endpoint = serve(workdir, "--port", "0")
    yield endpoint, workdir
    if endpoint.proc.poll() is None:
        endpoint.proc.kill()
    endpoint.proc.wait(timeout=EXIT_TIMEOUT)


def _wait_hosts(workdir: Path, job: str, count: int) -> list[dict[str, Any]]:
    path = workdir / "jobs" / job / "hosts.json"
    deadline = time.monotonic() + 20
    while True:
        if path.exists():
            facts: list[dict[str, Any]] = json.loads(path.read_text())
            if len(facts) == count:
                return facts
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _wait_entry_points(facts: list[dict[str, Any]]) -> None:
    """Wait until each host's shim has started its entry point."""
    import psutil

    deadline = time.monotonic() + 20
    while not all(psutil.Process(f["pid"]).children() for f in facts):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_serve_prints_the_connection_and_stops_on_ctrl_c(served: tuple[Served, Path]) -> None:
    (proc, url, lines, output), workdir = served
    text = "\n".join(lines)
    assert f"workdir: {workdir}" in text
    conn = re.search(r"export AIRFLOW_CONN_AWS_DEFAULT='(.+)'", text)
    assert conn
    assert json.loads(conn.group(1))["extra"] == {"endpoint_url": url, "region_name": "us-east-1"}
    assert f"AWS_ENDPOINT_URL={url}" in text
    assert make_client("sts", url).get_caller_identity()["Account"] == "123456789012"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 0
    assert output.read_to_end(EXIT_TIMEOUT) == ["stopping...", "stopped."]


def test_register_adds_local_serve() -> None:
    parser = argparse.ArgumentParser(prog="airflow-hetero")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["local", "serve", "--port", "4567", "--workdir", "/tmp/w", "--host", "0.0.0.0"])
    assert (args.port, args.workdir, args.host, args.seed) == (4567, Path("/tmp/w"), "0.0.0.0", 0)
    assert callable(args.handler)
    defaults = parser.parse_args(["local", "serve"])
    assert (defaults.port, defaults.host, defaults.stop_grace) == (0, "127.0.0.1", 5.0)
    assert parser.parse_args(["local", "serve", "--stop-grace", "0.5"]).stop_grace == 0.5


@pytest.mark.parametrize("kill_delay", [0.0, 0.5], ids=["prompt-kills", "late-kills"])
def test_crashed_endpoint_leaves_no_job_in_progress(
    served: tuple[Served, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_delay: float
) -> None:
    (proc, url, _, _), workdir = served
    s3, sm = make_client("s3", url), make_client("sagemaker", url)
    s3.create_bucket(Bucket=BUCKET)
    job = unique("crash")
    sm.create_training_job(**request(job, put_source(s3, job, SLEEPER)))
    wait(sm, job, secondary="Training")
    facts = _wait_hosts(workdir, job, 3)
    gone, orphans = facts[0], facts[1:]
    _wait_entry_points(orphans)
    for orphan in orphans:  # frozen (as in the middle of a stop): they cannot notice their endpoint's death
        os.kill(orphan["pid"], signal.SIGSTOP)
    proc.kill()  # the endpoint dies without a chance to clean up
    proc.wait(timeout=EXIT_TIMEOUT)
    deadline = time.monotonic() + 10
    while pid_alive(gone["pid"]) and time.monotonic() < deadline:  # the one left awake ends by itself
        time.sleep(0.05)
    assert not pid_alive(gone["pid"])
    assert all(pid_alive(f["pid"]) for f in orphans)  # the frozen ones are orphaned, still there

    if kill_delay:
        late_kills(monkeypatch, kill_delay)
    with LocalEndpoint(workdir=workdir) as restarted:
        assert restarted.service.recovered == [job]
        done = restarted.client("sagemaker").describe_training_job(TrainingJobName=job)
        ended = restarted.service.ended
    assert done["TrainingJobStatus"] == "Failed"
    assert done["SecondaryStatus"] == "Failed"
    survivors = ", ".join(f["host"] for f in orphans)
    assert done["FailureReason"] == (
        "InternalServerError: The local endpoint was restarted while the job was InProgress (Training); "
        f"host processes {gone['host']} were already gone; orphaned hosts {survivors} were terminated; "
        "2 other process(es) its hosts had started were still running and were killed. The job cannot be resumed."
    )
    assert {e.pid for e in ended} >= {f["pid"] for f in orphans}  # the shims, and their entry points
    assert len(ended) == 4
    assert not any(pid_alive(e.pid) for e in ended)


def test_clean_shutdown_ends_running_jobs_and_state_survives(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    with LocalEndpoint(workdir=workdir, run=RunOptions(stop_grace=1.0)) as first:
        s3, sm = first.client("s3"), first.client("sagemaker")
        s3.create_bucket(Bucket=BUCKET)
        quick, slow = unique("quick"), unique("slow")
        sm.create_training_job(**request(quick, put_source(s3, quick, "print('done')\n")))
        assert wait(sm, quick)["TrainingJobStatus"] == "Completed"
        sm.create_training_job(**request(slow, put_source(s3, slow, SLEEPER)))
        wait(sm, slow, secondary="Training")
        facts = _wait_hosts(workdir, slow, 3)
    assert not any(pid_alive(f["pid"]) for f in facts)

    with LocalEndpoint(workdir=workdir) as second:
        assert second.service.recovered == []
        sm = second.client("sagemaker")
        assert sm.describe_training_job(TrainingJobName=quick)["TrainingJobStatus"] == "Completed"
        stopped = sm.describe_training_job(TrainingJobName=slow)
        assert stopped["TrainingJobStatus"] == "Failed"
        assert stopped["FailureReason"] == (
            "InternalServerError: The local endpoint shut down while the job was running; its hosts were terminated."
        )
        names = [s["TrainingJobName"] for s in sm.list_training_jobs()["TrainingJobSummaries"]]
        assert sorted(names) == sorted([quick, slow])
        with pytest.raises(Exception, match="ResourceInUse"):
            sm.create_training_job(**request(quick, "s3://x/y"))
    assert workdir.exists()  # an explicit workdir is kept


def test_temporary_workdir_is_removed_on_stop() -> None:
    endpoint = LocalEndpoint().start()
    workdir = endpoint.workdir
    assert workdir.is_dir()
    endpoint.stop()
    assert not workdir.exists()
    endpoint.stop()  # stopping twice is harmless
