"""``python -m airflow_hetero.local serve`` as a child process of a test: start it, read its banner.

``workdir_processes`` lists what the hosts of a workdir's jobs started (pids recorded by the test
scripts, and the hosts' shims from ``hosts.json``); ``alive`` filters the ones still running.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from support.local_jobkit import pid_alive


def serve(workdir: Path, *args: str, timeout: float = 60.0) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start ``local serve --workdir WORKDIR ARGS...``; return (process, url, banner lines).

    The banner is read up to its last line (``Press Ctrl-C ...``); its stderr goes to its stdout.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_hetero.local", "serve", "--workdir", str(workdir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while not lines or not lines[-1].startswith("Press Ctrl-C"):
        line = proc.stdout.readline()
        if (not line and proc.poll() is not None) or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the endpoint did not start: {lines}")
        lines.append(line.rstrip("\n"))
    url = next((m.group(1) for m in map(re.compile(r"listening on (http://\S+)").search, lines) if m), None)
    assert url, lines
    return proc, url, lines


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
