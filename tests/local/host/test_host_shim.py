"""The host shim on its own: a burst of SIGTERMs never kills it before its tree, and its tree ends
within its grace even when nobody is left to kill it (its endpoint SIGKILLed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.child_output import ChildOutput
from support.serve_process import alive, recorded_pids

from airflow_hetero.local.host import shim
from airflow_hetero.local.host.process import SHIM

#: Seconds the kernel and a loaded machine may add to the shim's own bound.
SLACK = 3.0
#: How long a child may take to print what the test waits for, or to be gone once killed.
CHILD_TIMEOUT = 30.0

STUBBORN = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    deaf = subprocess.Popen(["/bin/sh", "-c", "trap '' TERM; exec sleep 300"], start_new_session=True)
    read, write = os.pipe()
    if os.fork() == 0:  # a daemon: fork, setsid, fork again, the middle one exits
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.write(write, str(os.getpid()).encode())
            time.sleep(300)
        os._exit(0)
    daemon = os.read(read, 64).decode()
    with open(sys.argv[1], "w") as f:
        f.write(f"{os.getpid()} {deaf.pid} {daemon}")
    time.sleep(300)
    """
)


@pytest.fixture
def pids_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pids"
    yield path
    for pid in alive(recorded_pids(path)):  # a failing test cleans up after itself
        os.kill(pid, signal.SIGKILL)


def _wait_recorded(path: Path, proc: subprocess.Popen[str]) -> list[int]:
    deadline = time.monotonic() + 30
    while not path.exists() or len(recorded_pids(path)) < 3:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    return recorded_pids(path)


def test_a_burst_of_sigterms_ends_the_whole_tree_within_the_grace(tmp_path: Path, pids_file: Path) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    proc = subprocess.Popen(
        [sys.executable, str(SHIM), "--", sys.executable, str(script), str(pids_file)],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    errors = ChildOutput(proc.stderr, "the shim's stderr")
    pids = _wait_recorded(pids_file, proc)
    try:
        started = time.monotonic()
        for _ in range(200):  # the endpoint sends several; a storm must not matter
            os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=shim.GRACE + shim.KILL_WAIT + SLACK)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=CHILD_TIMEOUT)
    assert errors.read_to_end(CHILD_TIMEOUT) == []  # no traceback: the handlers cannot fail
    assert code == -signal.SIGKILL  # the entry point ignored SIGTERM: the shim killed it, then itself
    assert alive(pids) == []
    assert took >= shim.GRACE * 0.9  # the grace was given
    print(f"\nshim tree gone {took:.2f} s after a burst of 200 SIGTERMs (grace {shim.GRACE} s)")


def test_the_shim_ends_its_tree_when_its_parent_is_killed(tmp_path: Path, pids_file: Path) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    parent = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        shim = subprocess.Popen(
            [sys.executable, {str(SHIM)!r}, "--parent", str(os.getpid()), "--grace", "0.5", "--",
             sys.executable, {str(script)!r}, {str(pids_file)!r}],
            start_new_session=True,
        )
        print(shim.pid, flush=True)
        time.sleep(300)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        (line,) = ChildOutput.of(proc).read_until(lambda _: True, CHILD_TIMEOUT, "the shim's pid")
        shim_pid = int(line)
        pids = [shim_pid, *_wait_recorded(pids_file, proc)]
    finally:
        proc.kill()  # the endpoint is SIGKILLed: nobody will stop its host
        proc.wait(timeout=CHILD_TIMEOUT)
    killed = time.monotonic()
    while alive(pids) and time.monotonic() < killed + 0.5 + shim.KILL_WAIT + SLACK:
        time.sleep(0.02)
    assert alive(pids) == []
    print(f"\nshim tree gone {time.monotonic() - killed:.2f} s after its parent's SIGKILL (grace 0.5 s)")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--", "a", "b"], (None, shim.GRACE, None, None, ["a", "b"])),
        (["--parent", "12", "--grace", "0.5", "--", "a"], (12, 0.5, None, None, ["a"])),
        (["a", "--grace"], (None, shim.GRACE, None, None, ["a", "--grace"])),
        (["--peak-rss-file", "/p", "--", "a"], (None, shim.GRACE, None, "/p", ["a"])),
    ],
)
def test_the_shim_reads_its_options_before_the_command(
    argv: list[str], expected: tuple[int | None, float, str | None, str | None, list[str]]
) -> None:
    assert shim.parse(argv) == expected
