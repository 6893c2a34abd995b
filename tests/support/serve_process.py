"""``python -m airflow_hetero.local serve`` as a child process of a test: start it, read its banner.

``serve`` returns the process with a ``ChildOutput`` that follows its output (stderr merged): read
what it prints later through that, never from ``proc.stdout`` (one reader per pipe).
``workdir_processes`` lists what the hosts of a workdir's jobs started (pids recorded by the test
scripts, and the hosts' shims from ``hosts.json``); ``alive`` filters the ones still running.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from support.child_output import ChildOutput
from support.local_jobkit import pid_alive

#: How long ``serve`` waits for the banner (a fresh interpreter importing the endpoint, on a loaded machine).
BANNER_TIMEOUT = 60.0
#: How long ``serve`` waits for the child it killed (the banner never came) to be gone.
KILLED_TIMEOUT = 30.0


class Served(NamedTuple):
    """A running ``local serve``: the process, its URL, its banner's lines, and the follower of its output."""

    proc: subprocess.Popen[str]
    url: str
    banner: list[str]
    output: ChildOutput


def serve(workdir: Path, *args: str, timeout: float = BANNER_TIMEOUT) -> Served:
    """Start ``local serve --workdir WORKDIR ARGS...``; return it once its banner is printed.

    The banner is read up to its last line (``Press Ctrl-C ...``); its stderr goes to its stdout. If it
    does not come within ``timeout`` seconds (or the process ends first), the process is killed and
    the AssertionError says what it printed.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_hetero.local", "serve", "--workdir", str(workdir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = ChildOutput.of(proc, name=f"local serve (pid {proc.pid})")
    try:
        lines = output.read_until(lambda line: line.startswith("Press Ctrl-C"), timeout, "the endpoint started")
    except AssertionError:
        proc.kill()
        proc.wait(timeout=KILLED_TIMEOUT)
        raise
    url = next((m.group(1) for m in map(re.compile(r"listening on (http://\S+)").search, lines) if m), None)
    assert url, lines
    return Served(proc, url, lines, output)


def recorded_pids(path: Path) -> list[int]:
    """Pids written to ``path`` by host scripts, space separated, a line per host."""
    if not path.exists():
        return []
    return [int(p) for line in path.read_text().splitlines() for p in line.split()]


def host_pids(workdir: Path, job: str) -> list[int]:
    """The pids of a job's host shims, from its ``hosts.json``."""
    path = workdir / "jobs" / job / "hosts.json"
    return [h["pid"] for h in json.loads(path.read_text())] if path.exists() else []


def alive(pids: list[int]) -> list[int]:
    """The pids of ``pids`` still running (zombies count as gone)."""
    return [pid for pid in pids if pid_alive(pid)]
