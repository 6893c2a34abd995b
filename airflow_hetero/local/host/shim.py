"""The first process of every host: runs the entry point and keeps every process it starts in reach.

Run as ``python shim.py -- COMMAND...`` (stdlib only, imports nothing of the package, so it
starts fast). On Linux it makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, no
privileges needed): a process the entry point starts stays its descendant even after it calls
``setsid()`` or double-forks, instead of being re-parented to init. So the endpoint finds every
process of a host by walking this process's tree, and nothing a training script starts can escape
a stop or a shutdown.

The shim exits with the entry point's exit code (or dies of the same signal). When the entry point
ends, whatever it left running is ended too (SIGTERM, then SIGKILL after ``GRACE`` seconds), as
when a SageMaker container stops. On SIGTERM it passes the signal to every descendant.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
#: Seconds the processes left behind by an ended entry point get between SIGTERM and SIGKILL.
GRACE = 2.0


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Pids of every living descendant of ``root`` (from ``/proc``; empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def signal_all(signum: int) -> None:
    """Send ``signum`` to every descendant of this process."""
    for pid in descendants(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def reap() -> None:
    """Reap every exited child (orphans re-parented to this subreaper included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_leftovers(grace: float = GRACE) -> None:
    """SIGTERM what the entry point left running, SIGKILL it after ``grace`` seconds, reap it all."""
    if not descendants(os.getpid()):
        return
    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while descendants(os.getpid()) and time.monotonic() < deadline:
        reap()
        time.sleep(0.02)
    signal_all(signal.SIGKILL)
    while descendants(os.getpid()):
        reap()
        time.sleep(0.01)
    reap()


def main(argv: list[str]) -> int:
    """Run ``argv`` (after ``--``), return its exit code; die of its signal when it was killed."""
    command = argv[1:] if argv and argv[0] == "--" else argv
    if not command:
        sys.stderr.write("hostshim: no command\n")
        return 2
    become_subreaper()
    child = subprocess.Popen(command)
    signal.signal(signal.SIGTERM, lambda *_: signal_all(signal.SIGTERM))
    signal.signal(signal.SIGINT, lambda *_: signal_all(signal.SIGINT))
    code = child.wait()
    end_leftovers()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
