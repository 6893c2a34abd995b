"""Ctrl-C of ``airflow-hetero local serve`` with jobs running: every process the hosts started ends,
including ones in new sessions and double-forked daemons, and the endpoint is gone within 10 s."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.local_jobkit import BUCKET, pid_alive, put_source, request, unique

from airflow_hetero.local.training.clients import make_client

pytestmark = pytest.mark.slow

ESCAPING_HOST = """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a stubborn entry point: only SIGKILL ends it
    pids = [os.getpid()]
    # a child in a session of its own (outside the host's process group), also deaf to SIGTERM
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
    pids.append(subprocess.Popen([sys.executable, "-c", code], start_new_session=True).pid)
    read, write = os.pipe()
    if os.fork() == 0:  # a classic daemon: fork, setsid, fork again, the middle one exits
        os.setsid()
        if os.fork() == 0:
            os.write(write, f"{os.getpid()}\\n".encode())
            time.sleep(300)
        os._exit(0)
    pids.append(int(os.read(read, 64).decode()))
    with open(os.environ["PIDS_FILE"], "a") as f:
        f.write(" ".join(map(str, pids)) + "\\n")
    time.sleep(300)
"""


def _serve(workdir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_hetero.local", "serve", "--workdir", str(workdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        match = re.search(r"listening on (http://\S+)", line)
        if match:
            return proc, match.group(1)
    proc.kill()
    raise AssertionError("the endpoint did not start")


def _pids(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [int(p) for line in path.read_text().splitlines() for p in line.split()]


def test_ctrl_c_ends_every_host_process_within_ten_seconds(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path / "workdir")
    pids_file = tmp_path / "pids"
    try:
        s3, sm = make_client("s3", url), make_client("sagemaker", url)
        s3.create_bucket(Bucket=BUCKET)
        jobs = [unique("ctrl-c"), unique("ctrl-c")]
        for job in jobs:
            body: dict[str, Any] = request(job, put_source(s3, job, ESCAPING_HOST), max_runtime=600)
            body["Environment"] = {"PIDS_FILE": str(pids_file)}
            sm.create_training_job(**body)
        deadline = time.monotonic() + 60
        while len(_pids(pids_file)) < 2 * 3 * 3:  # 2 jobs x 3 hosts x 3 processes
            assert time.monotonic() < deadline, _pids(pids_file)
            time.sleep(0.1)
        pids = _pids(pids_file)
        hosts = [
            h["pid"] for job in jobs for h in json.loads((tmp_path / "workdir/jobs" / job / "hosts.json").read_text())
        ]
        assert all(pid_alive(pid) for pid in pids + hosts)

        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    left = [pid for pid in pids + hosts if pid_alive(pid)]
    for pid in left:  # clean up before failing
        os.kill(pid, signal.SIGKILL)
    print(f"\nshutdown took {took:.2f} s; processes left: {len(left)} of {len(pids + hosts)}")
    assert left == []
    assert took < 10
    records = [json.loads((tmp_path / "workdir/jobs" / job / "job.json").read_text()) for job in jobs]
    assert all(r["TrainingJobStatus"] == "Failed" for r in records)
    assert all("shut down while the job was running" in r["FailureReason"] for r in records)
