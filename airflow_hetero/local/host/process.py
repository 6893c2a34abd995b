"""One host as a local process: start it in its own process group, read its output, end it.

Every host runs in a new session under :mod:`airflow_hetero.local.host.shim`, a child subreaper, so
every process the entry point starts stays in the host's process tree, even one that called
``setsid()``; the shim also ends its host when the endpoint's thread that started it dies (a
parent-death signal). Every process of a host carries the host's *mark* in its environment
(``AIRFLOW_HETERO_LOCAL_HOST``: the host's directory), inherited by everything it starts, so what a
host left behind is found by the mark even when its shim is gone (:func:`marked`). Stopping the job
sends SIGTERM to the group and the tree, as SageMaker does, then after a grace period freezes the
whole tree (SIGSTOP, so nothing can fork away) and SIGKILLs it. No step waits without a timeout.
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
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

LineSink = Callable[[str, int], None]
"""Receives each output line and its timestamp in milliseconds."""

SHIM = Path(__file__).with_name("shim.py")
MARK_ENV = "AIRFLOW_HETERO_LOCAL_HOST"
"""The environment variable that marks every process of a host (its value: the host's directory)."""
#: Rounds of freezing a process tree before it is killed (a tree still growing after this is killed as seen).
_FREEZE_ROUNDS = 20
#: Seconds a killed host's main process gets to be reaped, and its pipes to close.
KILL_WAIT = 2.0


@dataclass(frozen=True)
class EndedProcess:
    """A process that :func:`kill_tree` killed: pid, program name and host mark (None when unmarked)."""

    pid: int
    name: str
    mark: str | None


def host_mark(directory: Path | str) -> str:
    """The mark of a host whose directory is ``directory`` (an absolute path)."""
    return os.path.abspath(directory)


def tree(pid: int) -> list[Any]:
    """psutil processes of ``pid`` and all its living descendants (empty when it is gone)."""
    import psutil

    try:
        leader = psutil.Process(pid)
        return [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return []


def marked(root: Path | str) -> dict[int, tuple[Any, str]]:
    """Living processes (pid -> (psutil process, mark)) whose host mark lies in directory ``root``.

    Environments the endpoint may not read (other users' processes) are skipped; this process is never
    one of them.
    """
    import psutil

    base = host_mark(root)
    prefix = base.rstrip(os.sep) + os.sep
    found: dict[int, tuple[Any, str]] = {}
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            mark = proc.environ().get(MARK_ENV)
            if mark is not None and (mark == base or mark.startswith(prefix)) and proc.status() != "zombie":
                found[proc.pid] = (proc, mark)
        except psutil.Error:
            continue
    return found


def _members(pids: Iterable[int], root: Path | str | None) -> dict[int, tuple[Any, str | None]]:
    members: dict[int, tuple[Any, str | None]] = {p.pid: (p, None) for pid in pids for p in tree(pid)}
    if root is not None:
        members.update(marked(root))
    return members


def kill_tree(pids: Iterable[int] = (), root: Path | str | None = None) -> list[EndedProcess]:
    """Freeze the trees of ``pids`` and every process marked under ``root`` (SIGSTOP until no new
    process appears), then SIGKILL them all; return what was killed, each process once.

    Freezing first means no process can fork or re-parent a child away while the trees are killed.
    No ``pids``: only the marked processes (hosts whose main process is gone). One call for every
    tree and mark of a job: a killed process is not gone at once, so a second call would see (and
    report) it again.
    """
    import psutil

    pids = list(pids)
    frozen: dict[int, tuple[Any, str | None]] = {}
    for _ in range(_FREEZE_ROUNDS):
        fresh = {p: entry for p, entry in _members(pids, root).items() if p not in frozen}
        if not fresh:
            break
        for proc, _mark in fresh.values():
            with contextlib.suppress(psutil.Error):
                proc.suspend()
        frozen.update(fresh)
    ended: list[EndedProcess] = []
    for proc, mark in frozen.values():
        try:
            name = proc.name()
        except psutil.Error:
            name = "?"
        with contextlib.suppress(psutil.Error):
            proc.kill()
            ended.append(EndedProcess(proc.pid, name, mark))
    return ended


def wait_gone(ended: list[EndedProcess], timeout: float = KILL_WAIT) -> list[EndedProcess]:
    """Wait up to ``timeout`` seconds until every process of ``ended`` is gone (or a zombie); the rest."""
    import psutil

    deadline = time.monotonic() + timeout
    left = list(ended)
    while left:
        still = []
        for entry in left:
            try:
                if psutil.Process(entry.pid).status() != psutil.STATUS_ZOMBIE:
                    still.append(entry)
            except psutil.Error:
                pass
        left = still
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    return left


def opt_ml_problem(directory: Path, timeout: float = 10.0) -> str | None:
    """Why a host could not get ``directory`` as its own ``/opt/ml`` here (None: it can).

    Runs the host shim's namespace step once on ``/bin/true``, exactly as a host would start.
    """
    from airflow_hetero.local.host import shim

    try:
        done = subprocess.run(
            [sys.executable, str(SHIM), "--opt-ml", str(directory), "--", "/bin/true"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the check could not run: {exc}"
    if done.returncode == 0:
        return None
    lines = [line.removeprefix(shim.ISOLATION_PREFIX) for line in done.stderr.splitlines() if line.strip()]
    return "; ".join(lines) or f"the check exited with code {done.returncode}"


@dataclass(frozen=True)
class HostUsage:
    """The kernel's account of a host's main process and its reaped descendants, taken when reaped."""

    cpu_seconds: float
    """User plus system CPU time of the whole run."""
    ended: float
    """Epoch seconds when it ended (its output closed, or when it was reaped)."""
    peak_rss: int | None = None
    """Peak resident bytes of the host's largest process, as the shim saw it reaped (None: not known).

    Not the endpoint's own ``ru_maxrss`` of the shim: Linux carries a parent's peak over fork and
    exec, and the shim is forked from the endpoint; the entry point is forked from the small shim.
    """


class HostProcess:
    """A running host: its process group, pipes and output tails."""

    def __init__(
        self,
        name: str,
        command: list[str],
        *,
        env: dict[str, str],
        cwd: Path,
        log_file: Path,
        sink: LineSink,
        mark: str | None = None,
        grace: float = 2.0,
        opt_ml: Path | None = None,
    ) -> None:
        self.name = name
        self.opt_ml = opt_ml
        """The directory the host sees as ``/opt/ml`` (its own mount namespace); None: no namespace."""
        self.command = command
        self.mark = mark
        """The host's mark (see :func:`host_mark`), carried by all its processes; None: unmarked."""
        self._grace = grace
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
        """Start the process (under the host shim) in a new session; return its pid (= its group id).

        The shim ends the host by itself ``grace`` seconds after a SIGTERM, and when the thread that
        calls this dies (so call it from a thread that outlives the host, as a job's runner does).
        """
        env = dict(self._env)
        if self.mark is not None:
            env[MARK_ENV] = self.mark
        shim = [sys.executable, str(SHIM), "--parent", str(os.getpid()), "--grace", repr(self._grace)]
        shim += ["--peak-rss-file", str(self.peak_rss_file)]
        if self.opt_ml is not None:
            shim += ["--opt-ml", str(self.opt_ml)]
        shim.append("--")
        self.proc = subprocess.Popen(
            [*shim, *self.command],
            cwd=self._cwd,
            env=env,
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
        self._reap()
        return self.proc.returncode

    def _reap(self) -> None:
        """Reap the main process with ``wait4`` (keeping its :class:`HostUsage`) once it has exited.

        The exit code goes to ``Popen.returncode``, so Popen's own ``poll``/``wait`` see it.
        """
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        try:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere; Popen reports what it can
            proc.poll()
            return
        if pid == 0:
            return
        now = time.time()
        # Both pipes closed (usually at exit) is a closer end than the reaping, up to a poll later.
        ended = min(now, max(self._output_closed)) if len(self._output_closed) == len(self._readers) > 0 else now
        self.usage = HostUsage(cpu_seconds=rusage.ru_utime + rusage.ru_stime, ended=ended, peak_rss=self._peak_rss())
        proc.returncode = os.waitstatus_to_exitcode(status)

    @property
    def peak_rss_file(self) -> Path:
        """Where the shim writes the host's peak resident size when it ends (beside the log file)."""
        return self._log_file.with_name(self._log_file.stem + ".peak-rss")

    def _peak_rss(self) -> int | None:
        try:
            return int(self.peak_rss_file.read_text(encoding="ascii")) or None
        except (OSError, ValueError):  # killed before it could write, or a full disk
            return None

    def wait(self, timeout: float) -> None:
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
        """SIGTERM the host, kill everything of it after ``grace`` seconds, reap it, drain the pipes.

        Bounded: ``grace`` plus at most ``2 * KILL_WAIT`` seconds, whatever the host does.
        """
        if self.proc is None:
            return
        if self.poll() is None:
            self.signal_group(signal.SIGTERM)
            self.wait(grace)
        self.kill()
        self.wait(KILL_WAIT)
        self.join_output(KILL_WAIT)

    def kill(self, *, by_mark: bool = True) -> list[EndedProcess]:
        """SIGKILL everything of the host still running: the shim's tree and group while the shim is
        unreaped, and (``by_mark``) every process carrying the host's mark (found even when the shim is
        gone; a caller ending several hosts sweeps their marks at once instead)."""
        if self.proc is None:
            return []
        ended = kill_tree(self.live_pids(), self.mark if by_mark else None)
        self.kill_group()
        return ended

    def live_pids(self) -> list[int]:
        """The main process's pid while it is unreaped (its pid and group are still the host's), else none."""
        return [self.proc.pid] if self.proc is not None and self.proc.returncode is None else []

    def kill_group(self) -> None:
        """SIGKILL the host's process group while the main process is unreaped (a member a tree walk missed)."""
        for pid in self.live_pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def join_output(self, timeout: float = KILL_WAIT) -> bool:
        """Wait up to ``timeout`` seconds until both pipes are drained (every line has reached the sinks).

        Returns False when a pipe is still open (a process out of reach holds it); its reader stays a
        daemon thread.
        """
        deadline = time.monotonic() + timeout
        for reader in self._readers:
            reader.join(max(0.0, deadline - time.monotonic()))
        open_pipes = [reader for reader in self._readers if reader.is_alive()]
        if open_pipes:
            log.warning("host %s: its output was still open %.1f s after it was ended", self.name, timeout)
        return not open_pipes
