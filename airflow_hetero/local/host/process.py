"""One host as a local process: start it in its own process group, read its output, end it.

Every host runs in a new session under :mod:`airflow_hetero.local.host.shim`, a child subreaper, so
every process the entry point starts stays in the host's process tree, even one that called
``setsid()``. Stopping the job sends SIGTERM to the group and the tree, as SageMaker does, then
after a grace period freezes the whole tree (SIGSTOP, so nothing can fork away) and SIGKILLs it.
Output is read line by line from both pipes into the host's log file and the log shipper; the last
stderr lines are kept for the job's FailureReason. A log file that cannot be written (full disk)
never stops the reader: lines still reach the log stream and :attr:`HostProcess.write_error` says
what failed. The main process is reaped with ``wait4`` so that the kernel's account of its CPU
time is kept as :class:`HostUsage`: a host that lives shorter than one metrics interval still gets
a CPU figure.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

LineSink = Callable[[str, int], None]
"""Receives each output line and its timestamp in milliseconds."""

SHIM = Path(__file__).with_name("shim.py")
#: Rounds of freezing a process tree before it is killed (a tree still growing after this is killed as seen).
_FREEZE_ROUNDS = 20


def tree(pid: int) -> list[Any]:
    """psutil processes of ``pid`` and all its living descendants (empty when it is gone)."""
    import psutil

    try:
        leader = psutil.Process(pid)
        return [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return []


def kill_tree(pid: int) -> int:
    """Freeze ``pid`` and every descendant (SIGSTOP until no new process appears), then SIGKILL them all.

    Freezing first means no process can fork or re-parent a child away while the tree is killed.
    Returns how many processes were killed.
    """
    import psutil

    frozen: dict[int, Any] = {}
    for _ in range(_FREEZE_ROUNDS):
        fresh = [p for p in tree(pid) if p.pid not in frozen]
        if not fresh:
            break
        for proc in fresh:
            with contextlib.suppress(psutil.Error):
                proc.suspend()
            frozen[proc.pid] = proc
    for proc in frozen.values():
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return len(frozen)


@dataclass(frozen=True)
class HostUsage:
    """The kernel's account of a host's main process and its reaped descendants, taken when reaped.

    (No peak memory: Linux's ``ru_maxrss`` of a child carries its parent's over fork and exec.)
    """

    cpu_seconds: float
    """User plus system CPU time of the whole run."""
    ended: float
    """Epoch seconds when it ended (its output closed, or when it was reaped)."""


class HostProcess:
    """A running host: its process group, pipes and output tails."""

    def __init__(
        self, name: str, command: list[str], *, env: dict[str, str], cwd: Path, log_file: Path, sink: LineSink
    ) -> None:
        self.name = name
        self.command = command
        self._env = env
        self._cwd = cwd
        self._log_file = log_file
        self._sink = sink
        self._file_lock = threading.Lock()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self._output_tail: collections.deque[str] = collections.deque(maxlen=20)
        self._readers: list[threading.Thread] = []
        self._output_closed: list[float] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.usage: HostUsage | None = None
        """Set once the main process has been reaped (None while it runs)."""
        self.write_error: OSError | None = None
        """The first error writing the host's log file (a full disk), None while all is well."""

    def write_line(self, line: str, timestamp_ms: int | None = None) -> None:
        """Record a line as host output (log file and log stream), e.g. the start-up banner.

        A failing log file (full disk) is noted in :attr:`write_error`; the line still goes to the sink.
        """
        stamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        if self.write_error is None:
            try:
                self._append(line)
            except OSError as exc:
                self.write_error = exc
        self._sink(line, stamp)

    def _append(self, line: str) -> None:
        with self._file_lock, self._log_file.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def start(self) -> int:
        """Start the process (under the host shim) in a new session; return its pid (= its group id)."""
        self.proc = subprocess.Popen(
            [sys.executable, str(SHIM), "--", *self.command],
            cwd=self._cwd,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        for stream, is_err in ((self.proc.stdout, False), (self.proc.stderr, True)):
            reader = threading.Thread(target=self._read, args=(stream, is_err), name=f"{self.name}-out", daemon=True)
            reader.start()
            self._readers.append(reader)
        return self.proc.pid

    def _read(self, stream: IO[bytes], is_err: bool) -> None:
        try:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if is_err and line.strip():
                    self._stderr_tail.append(line)
                if line.strip():
                    self._output_tail.append(line)
                try:
                    self.write_line(line)
                except Exception as exc:  # a failing sink must not stall the host on a full pipe
                    if self.write_error is None:
                        self.write_error = OSError(f"could not record output: {exc!r}")
        finally:
            stream.close()
            self._output_closed.append(time.time())

    @property
    def pid(self) -> int:
        """The host's main process id."""
        assert self.proc is not None
        return self.proc.pid

    def poll(self) -> int | None:
        """Exit code of the main process, or None while it runs."""
        if self.proc is None:
            return None
        self._reap(block=False)
        return self.proc.returncode

    def _reap(self, *, block: bool) -> None:
        """Reap the main process with ``wait4`` (keeping its :class:`HostUsage`) once it has exited.

        The exit code goes to ``Popen.returncode``, so Popen's own ``poll``/``wait`` see it.
        """
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        try:
            pid, status, rusage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere; Popen reports what it can
            proc.poll()
            return
        if pid == 0:
            return
        now = time.time()
        # Both pipes closed (usually at exit) is a closer end than the reaping, up to a poll later.
        ended = min(now, max(self._output_closed)) if len(self._output_closed) == len(self._readers) > 0 else now
        self.usage = HostUsage(cpu_seconds=rusage.ru_utime + rusage.ru_stime, ended=ended)
        proc.returncode = os.waitstatus_to_exitcode(status)

    def _wait(self, timeout: float) -> None:
        """Reap the main process if it exits within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.02, left))

    def error_tail(self, count: int = 5) -> list[str]:
        """The last non-empty stderr lines (stdout's when stderr stayed silent)."""
        lines = list(self._stderr_tail) or list(self._output_tail)
        return lines[-count:]

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the host's process group and to the shim (which passes it to the whole tree)."""
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signum)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.proc.pid, signum)

    def terminate(self, grace: float) -> None:
        """SIGTERM the host, kill its whole tree after ``grace`` seconds, reap it, drain the pipes."""
        if self.proc is None:
            return
        if self.poll() is None:
            self.signal_group(signal.SIGTERM)
            self._wait(grace)
        if self.proc.returncode is None:  # still unreaped: its tree is still reachable from it
            kill_tree(self.proc.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # a group member the tree walk did not see
        self._reap(block=True)
        self.join_output()

    def join_output(self, timeout: float = 5.0) -> None:
        """Wait until both pipes are drained (every line has reached the sinks)."""
        for reader in self._readers:
            reader.join(timeout)
