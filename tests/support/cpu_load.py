"""CPU burners: keep every core busy while a test runs, as on a loaded laptop or CI runner.

Each burner is a process spinning in a pure-Python loop. Burners stop when the ``with`` block ends
(SIGKILL), and on their own when the process that started them is gone or after ``limit`` seconds,
so a test run that is itself killed leaves none behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_BURN = """
import os, sys, time
parent, end = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(20000):
        pass
"""


def default_count() -> int:
    """Two burners per core: more runnable processes than cores, so every wake-up waits its turn."""
    return 2 * (os.cpu_count() or 1)


@contextmanager
def cpu_burners(count: int | None = None, *, limit: float = 600.0) -> Iterator[list[int]]:
    """Run ``count`` CPU burners (two per core by default) for the ``with`` block; yields their pids."""
    procs = [
        subprocess.Popen([sys.executable, "-c", _BURN, str(os.getpid()), str(limit)])
        for _ in range(count if count is not None else default_count())
    ]
    try:
        yield [proc.pid for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
