"""One test at a time on this machine whose training hosts listen on a given fixed port.

Every offline endpoint gives its jobs' hosts the addresses ``127.0.<slot>.<n>`` with slots counted
from 1, so the hosts of two endpoints (two pytest-xdist workers, or the Airflow 2 and 3 suites that
``make test`` runs side by side) share addresses. Hosts that listen on a port they do not choose
(the example job's 7100, the toolkit's torch/MPI rendezvous port 7777, torchrun's 29500) would then
collide with hosts listening on the same port. Tests marked ``fixed_ports(PORT, ...)`` hold a
machine-wide lock per port they name while they run (tests/conftest.py): two tests of the same port
never overlap, tests of different ports may (their hosts cannot collide on a port).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from support.file_lock import held

#: How long a test waits for the other tests of its ports (a queue of the suites' slowest e2e tests on a
#: loaded machine is a few minutes; past this, something holds the lock for good).
WAIT_SECONDS = 1200
#: The lock files, one per port: ``airflow-hetero-tests-fixed-port-<port>.lock``.
LOCK_DIR = Path(tempfile.gettempdir())


def lock_file(port: int) -> Path:
    return LOCK_DIR / f"airflow-hetero-tests-fixed-port-{port}.lock"


@contextmanager
def fixed_ports(*ports: int) -> Iterator[None]:
    """Hold the lock of each of ``ports`` (waiting for any other holder) for the ``with`` block; taken in
    ascending order, so two tests that name several ports cannot wait for each other."""
    if not ports:
        raise ValueError("fixed_ports: name the port(s) the test's hosts listen on, e.g. fixed_ports(7100)")
    with ExitStack() as stack:
        for port in sorted(set(ports)):
            stack.enter_context(held(lock_file(port), WAIT_SECONDS, f"the tests of fixed port {port}"))
        yield
