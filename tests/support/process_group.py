"""Long-running child processes of a test, each in a process group of its own, all stopped at the end.

Every process started here carries ``MARK=<token>`` in its environment, which its children inherit:
:meth:`Processes.leftovers` finds any of them still running, whichever session or group it moved
to (a host of the offline endpoint, a Celery pool child, a task runner). :meth:`Processes.stop_all`
is registered with :mod:`atexit` too, so a crashed test run leaves nothing behind either.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import psutil

MARK = "HETERO_SYSTEM_PROCESS"
T = TypeVar("T")


@dataclass
class Started:
    """One started process: its name, Popen handle and log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, chars: int = 4000) -> str:
        """The end of its log (for assertion messages)."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@dataclass
class Processes:
    """The test's processes by name; ``token`` marks them and everything they start."""

    logs: Path
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    started: dict[str, Started] = field(default_factory=dict)
    _count: int = 0

    def __post_init__(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop_all)

    def start(
        self,
        name: str,
        argv: list[str],
        env: Mapping[str, str],
        cwd: Path,
        user: str | None = None,
    ) -> Started:
        """Start ``argv`` in a new session (so its group id is its pid), output to ``logs/<name>.log``."""
        if name in self.started and self.started[name].proc.poll() is None:
            raise AssertionError(f"{name} is already running")
        self._count += 1
        log = self.logs / f"{name}-{self._count}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                env={**env, MARK: self.token},
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                user=user,
            )
        self.started[name] = Started(name, proc, log)
        return self.started[name]

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL, timeout: float = 30.0) -> None:
        """Send ``sig`` to the whole process group of ``name`` and wait for its leader to end."""
        started = self.started[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started.proc.pid, sig)
        started.proc.wait(timeout=timeout)
        if sig == signal.SIGKILL:  # nothing of the group survives a machine-loss stand-in
            self._kill_marked(lambda p: _pgid(p) == started.proc.pid)

    def leftovers(self) -> list[psutil.Process]:
        """Every running process that carries this run's mark (zombies count as gone)."""
        found = []
        for proc in psutil.process_iter(["pid", "status"]):
            if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            try:
                if proc.environ().get(MARK) == self.token:
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return found

    def stop(self, name: str, grace: float = 20.0) -> None:
        """SIGTERM the group of ``name``; SIGKILL it after ``grace`` seconds."""
        started = self.started[name]
        if started.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started.proc.pid, signal.SIGTERM)
        try:
            started.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill(name)

    def stop_all(self, order: tuple[str, ...] = (), grace: float = 20.0) -> None:
        """Stop ``order`` first (in that order), then the rest, then SIGKILL whatever still carries the mark."""
        names = [n for n in order if n in self.started] + [n for n in reversed(self.started) if n not in order]
        for name in names:
            self.stop(name, grace)
        deadline = time.monotonic() + grace
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.5)
        self._kill_marked(lambda p: True)

    def _kill_marked(self, which: Callable[[psutil.Process], bool]) -> None:
        chosen = [p for p in self.leftovers() if which(p)]
        for proc in chosen:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(chosen, timeout=10)


def _pgid(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except ProcessLookupError:
        return None


def wait_until(
    what: str, check: Callable[[], T], timeout: float, interval: float = 1.0, detail: Callable[[], str] | None = None
) -> T:
    """Call ``check()`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = detail() if detail else ""
            raise AssertionError(f"{what}: not within {timeout:.0f} s\n{extra}")
        time.sleep(interval)
