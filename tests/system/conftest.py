"""The running system the tests of this folder share: started once, stopped whatever happens.

Collected only under ``make system`` (``HETERO_SYSTEM_TEST=1``, the venv with the package's wheel,
Airflow's celery and postgres extras and nothing of the checkout); elsewhere every test here skips.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ENABLED = bool(os.environ.get("HETERO_SYSTEM_TEST"))
DAGS = Path(__file__).parent / "dags"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ENABLED:
        return
    skip = pytest.mark.skip(reason="the system test runs under `make system` (its own venv, PostgreSQL, Redis)")
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def stack() -> Iterator[object]:
    """PostgreSQL, Redis, the offline endpoint and every Airflow component, the DAGs deployed."""
    from support.system_airflow import start_stack
    from support.system_jobs import seed_bucket

    root = Path(tempfile.mkdtemp(prefix="hetero-system-"))
    dags = root / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    started = time.monotonic()
    system = start_stack(root, dags)
    try:
        seed_bucket(system)
        print(f"\nsystem started in {time.monotonic() - started:.0f} s; logs in {root / 'logs'}")
        yield system
    finally:
        system.stop()
        left = system.procs.leftovers()
        assert not left, f"processes left running: {[(p.pid, p.name()) for p in left]}"
        if not os.environ.get("HETERO_SYSTEM_KEEP"):
            shutil.rmtree(root, ignore_errors=True)
