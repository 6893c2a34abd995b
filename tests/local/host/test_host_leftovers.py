"""A host whose shim dies while its job runs: what it started (a new session, a daemon) is found by
the host's mark and killed when the job ends, although no process tree leads to it any more (nor, for
the daemon, the host's output pipes)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from support.late_kills import late_kills
from support.local_jobkit import put_source, request, unique, wait
from support.serve_process import alive, recorded_pids

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.host.process import kill_tree, marked

pytestmark = pytest.mark.slow

LEAVER = """
    import os, signal, subprocess, sys, time
    deaf = subprocess.Popen(["/bin/sh", "-c", "trap '' TERM; exec sleep 300"], start_new_session=True)
    read, write = os.pipe()
    if os.fork() == 0:  # a daemon: fork, setsid, fork again, the middle one exits
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # it lets go of the host's output, as daemons do
                os.dup2(null, fd)
            os.write(write, f"{os.getpid()}".encode())
            time.sleep(300)
        os._exit(0)
    daemon = os.read(read, 64).decode()
    with open(os.environ["PIDS_FILE"], "a") as f:
        f.write(f"{os.getpid()} {deaf.pid} {daemon}\\n")
    time.sleep(300)
"""


@pytest.mark.parametrize("kill_delay", [0.0, 0.5], ids=["prompt-kills", "late-kills"])
def test_what_a_dead_shim_left_is_killed_by_its_mark(
    endpoint: LocalEndpoint, sm: Any, s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_delay: float
) -> None:
    pids_file = tmp_path / "pids"
    job = unique("leaver")
    body = request(job, put_source(s3, job, LEAVER), groups=(("solo", "ml.c5.xlarge", 1),))
    body["Environment"] = {"PIDS_FILE": str(pids_file)}
    sm.create_training_job(**body)
    try:
        deadline = time.monotonic() + 30
        while len(recorded_pids(pids_file)) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        pids = recorded_pids(pids_file)
        host_dir = endpoint.job_dir(job) / "hosts" / "algo-1"
        assert set(marked(host_dir)) >= set(pids)  # every process carries the host's mark
        (host,) = json.loads((endpoint.job_dir(job) / "hosts.json").read_text())
        if kill_delay:  # a loaded machine: the daemon, killed, is not gone at once
            late_kills(monkeypatch, kill_delay, only=pids[2:])
        os.kill(host["pid"], signal.SIGKILL)  # the shim dies: its children go to init
        described = wait(sm, job)
        assert alive(pids) == []  # an ended job has no process left running
    finally:
        kill_tree(root=endpoint.job_dir(job))
    assert described["TrainingJobStatus"] == "Failed"
    assert described["FailureReason"].startswith(
        "AlgorithmError: host algo-1 (instance group solo) was killed by signal SIGKILL."
    )
