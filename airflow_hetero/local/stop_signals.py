"""Stop signals that take no lock: a flag the handler sets and a socket the waiting loop selects on.

Python runs a signal handler in the main thread, between two of its bytecodes, whatever that thread
holds at that moment. A handler that takes a lock (``Event.set``, a ``Condition``, ``Queue.put``,
logging's handler lock) deadlocks when the main thread already holds that lock, for example inside
``Event.wait(timeout)``: ``local serve`` once hung so on Ctrl-C (docs/local.md, "Stopping").

Here the handler only assigns an attribute. The wake-up comes from the interpreter's C-level handler,
which writes the signal number to a socket (``signal.set_wakeup_fd``) the moment the signal arrives,
whichever thread the kernel picked; ``wait`` selects on that socket and holds nothing while it waits.
"""

from __future__ import annotations

import select
import signal
import socket
from collections.abc import Iterable
from types import FrameType, TracebackType
from typing import Any


class StopSignals:
    """Install handlers for ``signals`` while in the ``with`` block; ``wait`` until one came.

    Main thread only (as ``signal.signal`` is). The previous handlers and wake-up fd come back on exit.
    """

    def __init__(self, signals: Iterable[signal.Signals]) -> None:
        self.signals = tuple(signals)
        #: The first stop signal received, or None. Written by the handler, read by the loop.
        self.received: int | None = None
        self._previous: dict[signal.Signals, Any] = {}
        self._previous_fd = -1
        self._reader: socket.socket | None = None
        self._writer: socket.socket | None = None

    def handle(self, signum: int, frame: FrameType | None = None) -> None:
        """The signal handler: note the signal and nothing else, so it can neither fail nor block."""
        if self.received is None:
            self.received = signum

    def wait(self, timeout: float) -> int | None:
        """Until a stop signal came or ``timeout`` seconds passed; the signal, or None.

        Holds no lock while it waits, so the handler can run at any point of it.
        """
        if self.received is None and self._reader is not None:
            ready, _, _ = select.select([self._reader], [], [], timeout)
            if ready:
                self._drain()
        return self.received

    def _drain(self) -> None:
        assert self._reader is not None
        try:
            while self._reader.recv(512):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def __enter__(self) -> StopSignals:
        self._reader, self._writer = socket.socketpair()
        for end in (self._reader, self._writer):
            end.setblocking(False)
        # a full buffer (many signals, no reader yet) is no error: one byte is enough to wake the loop
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self.handle)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: not set from Python
        self._previous.clear()
        signal.set_wakeup_fd(self._previous_fd)
        for end in (self._reader, self._writer):
            if end is not None:
                end.close()
        self._reader = self._writer = None
