"""A machine-wide lock on a file, taken within a deadline: a holder that never lets go fails the waiter with
the lock's name instead of hanging it (``flock`` alone waits for ever)."""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: How often a waiter tries the lock again.
POLL_SECONDS = 0.1


@contextmanager
def held(path: Path, timeout: float, purpose: str) -> Iterator[None]:
    """Hold ``path``'s exclusive lock for the ``with`` block; TimeoutError naming ``purpose`` and the file when
    another holder keeps it past ``timeout`` seconds."""
    with path.open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    message = f"{purpose}: {path} still locked by another process after {timeout:g} s"
                    raise TimeoutError(message) from None
                time.sleep(POLL_SECONDS)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
