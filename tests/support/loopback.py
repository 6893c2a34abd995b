"""One test at a time on this machine whose training hosts listen on fixed ports.

Every offline endpoint gives its jobs' hosts the addresses ``127.0.<slot>.<n>`` with slots counted
from 1, so the hosts of two endpoints (two pytest-xdist workers, or the Airflow 2 and 3 suites that
``make test`` runs side by side) share addresses. Hosts that listen on a port they do not choose
(the example job's 7100, torchrun's and the toolkit's rendezvous ports) would then collide. Tests
marked ``fixed_ports`` hold this machine-wide lock while they run (tests/conftest.py).
"""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = Path(tempfile.gettempdir()) / "airflow-hetero-tests-fixed-ports.lock"


@contextmanager
def fixed_ports() -> Iterator[None]:
    """Hold the lock (waiting for any other holder) for the ``with`` block."""
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
