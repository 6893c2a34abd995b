"""CPU burners: keep every core busy while a test runs, as on a loaded laptop or CI runner.

Each burner is a process spinning in a pure-Python loop. Burners stop when the ``with`` block ends
(SIGKILL), and on their own when the process that started them is gone or after ``limit`` seconds,
so a test run that is itself killed leaves none behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: How long a killed burner may take to be reaped (SIGKILL: only a loaded machine delays it).
KILLED_TIMEOUT = 30.0

_BURN = """
import os, sys, time
parent, end = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(20000):
        pass
"""


def default_count() -> int:
    """Two runnable processes per core: more than cores, so every wake-up waits its turn."""
    return 2 * (os.cpu_count() or 1)


def runnable_now(samples: int = 5, every: float = 0.05) -> float:
    """Processes runnable right now besides this one (``procs_running`` of ``/proc/stat``, averaged over a
    few samples); where that is not available, the 1-minute load average (which lags by a minute)."""
    try:
        counts = []
        for i in range(samples):
            if i:
                time.sleep(every)
            with open("/proc/stat", encoding="ascii") as stat:
                counts += [int(line.split()[1]) - 1 for line in stat if line.startswith("procs_running ")]
        return sum(counts) / len(counts) if counts else os.getloadavg()[0]
    except OSError:
        return os.getloadavg()[0]


def top_up_count() -> int:
    """Burners to add for :func:`default_count` runnable processes, counting those running now. On a machine
    that busy already (the suite's other workers, the other suite) none are added: burners there only slow the
    rest of the run, not make this test's conditions harder."""
    return max(0, default_count() - round(runnable_now()))


@contextmanager
def cpu_burners(count: int | None = None, *, limit: float = 600.0) -> Iterator[list[int]]:
    """Run ``count`` CPU burners (default: up to two runnable processes per core) for the ``with`` block;
    yields their pids."""
    procs = [
        subprocess.Popen([sys.executable, "-c", _BURN, str(os.getpid()), str(limit)])
        for _ in range(count if count is not None else top_up_count())
    ]
    try:
        yield [proc.pid for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=KILLED_TIMEOUT)
