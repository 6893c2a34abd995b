"""Follow a child process's text output with a deadline on every read; wait for its exit with one.

A daemon thread reads the stream (a ``Popen``'s ``stdout``, with its stderr merged or not, or its
``stderr``) line by line into a queue; the test takes lines from the queue with a deadline. A child
that prints nothing, or never closes its output, fails the test saying what was awaited and what it
printed, instead of blocking the test, its worker and ``make test``::

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = ChildOutput.of(proc)
    banner = output.read_until(lambda line: line.startswith("Press Ctrl-C"), 60, "the banner")
    ...
    seen = output.look_for(lambda line: line.startswith("stopped."), 30)  # no raise: seen.matched/ended

Only one reader per pipe: once a ``ChildOutput`` follows a stream, read that stream through it.
Lines are given without their line ending. ``wait_exit`` waits for a child's exit with a deadline,
and kills it if the deadline passes.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

#: What is shown of the output in an assertion message: its last lines.
SHOWN = 40
#: How long ``wait_exit`` waits for a child it killed (SIGKILL: only a loaded machine delays it).
KILLED_TIMEOUT = 30.0


@dataclass(frozen=True)
class Seen:
    """What a read saw: the lines taken, and why it returned.

    ``matched``: the last line satisfied the predicate; ``ended``: the output ended (end of file)
    first; neither: the deadline passed first.
    """

    lines: list[str]
    matched: bool
    ended: bool

    @property
    def timed_out(self) -> bool:
        return not self.matched and not self.ended


class ChildOutput:
    """The lines of one text stream, read by a daemon thread; every read has a deadline."""

    def __init__(self, stream: IO[str], name: str = "the child") -> None:
        self.name = name
        self._lines: queue.Queue[str | None] = queue.Queue()  # None: the end of the output
        self._received: list[str] = []
        self._lock = threading.Lock()
        self._ended = False  # the consumer took the end marker
        self._thread = threading.Thread(target=self._read, args=(stream,), name=f"output of {name}", daemon=True)
        self._thread.start()

    @classmethod
    def of(cls, proc: subprocess.Popen[str], name: str | None = None) -> ChildOutput:
        """Follow ``proc.stdout`` (opened with ``stdout=PIPE, text=True``)."""
        assert proc.stdout is not None, "the child's stdout is not a pipe"
        return cls(proc.stdout, name or f"pid {proc.pid} ({' '.join(map(str, _args(proc)))[:80]})")

    def _read(self, stream: IO[str]) -> None:
        try:
            for raw in stream:  # this daemon thread may block; its consumers read the queue with deadlines
                line = raw.rstrip("\r\n")
                with self._lock:
                    self._received.append(line)
                self._lines.put(line)
        except (OSError, ValueError):  # closed under us: the output ends here
            pass
        finally:
            self._lines.put(None)
            with contextlib.suppress(OSError):
                stream.close()

    def lines_so_far(self) -> list[str]:
        """Every line received so far, taken by a read or not."""
        with self._lock:
            return list(self._received)

    @property
    def ended(self) -> bool:
        """The child closed its output, and every line of it has been taken by a read."""
        return self._ended

    def look_for(self, predicate: Callable[[str], bool], timeout: float) -> Seen:
        """Take lines until one satisfies ``predicate`` (it is the last of ``Seen.lines``), the output
        ends, or ``timeout`` seconds pass; never raises."""
        deadline = time.monotonic() + timeout
        taken: list[str] = []
        while not self._ended:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=left) if left > 0 else self._lines.get_nowait()
            except queue.Empty:
                return Seen(taken, matched=False, ended=False)
            if line is None:
                self._ended = True
                break
            taken.append(line)
            if predicate(line):
                return Seen(taken, matched=True, ended=False)
        return Seen(taken, matched=False, ended=True)

    def read_until(self, predicate: Callable[[str], bool], timeout: float, what: str) -> list[str]:
        """The lines up to and including the first that satisfies ``predicate``; an AssertionError
        naming ``what`` and the output seen if the output ends or ``timeout`` seconds pass first."""
        seen = self.look_for(predicate, timeout)
        if not seen.matched:
            why = "its output ended" if seen.ended else f"{timeout:g} s passed"
            raise AssertionError(f"{self.name}: {why} before {what}; it printed:\n{self._tail()}")
        return seen.lines

    def read_to_end(self, timeout: float) -> list[str]:
        """The remaining lines, once the output ends; an AssertionError if ``timeout`` seconds pass first."""
        seen = self.look_for(lambda _: False, timeout)
        if not seen.ended:
            raise AssertionError(
                f"{self.name}: its output had not ended after {timeout:g} s; it printed:\n{self._tail()}"
            )
        return seen.lines

    def _tail(self) -> str:
        lines = self.lines_so_far()
        shown = "\n".join(f"    {line}" for line in lines[-SHOWN:])
        return (f"    ... ({len(lines) - SHOWN} lines before)\n" if len(lines) > SHOWN else "") + (
            shown or "    (nothing)"
        )


def wait_exit(proc: subprocess.Popen[str] | subprocess.Popen[bytes], timeout: float, what: str) -> int:
    """``proc``'s exit code once it exits; if ``timeout`` seconds pass first, it is killed and an
    AssertionError says ``what`` was awaited."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # the AssertionError below says what went wrong
            proc.wait(timeout=KILLED_TIMEOUT)
        raise AssertionError(f"pid {proc.pid}: {timeout:g} s passed before {what}; it was killed") from None


def _args(proc: subprocess.Popen[str]) -> list[str]:
    args = proc.args
    return [str(a) for a in args] if isinstance(args, list | tuple) else [str(args)]
