"""Killed processes that are not gone at once, as on a loaded machine: the SIGKILLs psutil sends
arrive late, so code that looks right after a kill still sees the process running."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Collection

import pytest


def late_kills(monkeypatch: pytest.MonkeyPatch, delay: float, only: Collection[int] | None = None) -> None:
    """Make ``psutil.Process.kill`` deliver its SIGKILL ``delay`` seconds late (to the pids in ``only``;
    None: to every process; the others are killed at once)."""
    import psutil

    kill = psutil.Process.kill

    def late_kill(self: psutil.Process) -> None:
        if only is not None and self.pid not in only:
            kill(self)
            return
        pid = self.pid
        threading.Timer(delay, lambda: _signal_quietly(pid, signal.SIGKILL)).start()

    monkeypatch.setattr(psutil.Process, "kill", late_kill)


def _signal_quietly(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
