"""The running system the tests of this folder share: started once, stopped whatever happens.

Collected only under ``make system`` (``HETERO_SYSTEM_TEST=1``, the venv with the package's wheel,
Airflow's celery and postgres extras and nothing of the checkout); elsewhere every test here skips.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ENABLED = bool(os.environ.get("HETERO_SYSTEM_TEST"))
#: Deferred runs started at once.
DEFERRED_RUNS = 6
DAGS = Path(__file__).parent / "dags"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ENABLED:  # the tests that wait for the scheduled retraining runs go last: the runs go on meanwhile
        items.sort(key=lambda item: "retraining_runs" in getattr(item, "fixturenames", ()))
        return
    skip = pytest.mark.skip(reason="the system test runs under `make system` (its own venv, PostgreSQL, Redis)")
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def stack() -> Iterator[Any]:
    """PostgreSQL, Redis, the offline endpoint and every Airflow component, the DAGs deployed (and beside them
    the installed example's job definition and code, ``hetero_retraining/``, which ``system_retraining`` runs)."""
    from support.system_airflow import start_stack
    from support.system_jobs import seed_bucket
    from support.system_retraining import NO_CAPACITY_TYPE

    from airflow_hetero import example_dags

    root = Path(tempfile.mkdtemp(prefix="hetero-system-"))
    dags = root / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    (dags / "hetero_retraining").symlink_to(example_dags.folder() / "hetero_retraining")
    started = time.monotonic()
    system = start_stack(root, dags, capacity={NO_CAPACITY_TYPE: 0})
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


@pytest.fixture(scope="session")
def deferred_runs(stack: Any) -> Iterator[tuple[list[str], int]]:
    """``DEFERRED_RUNS`` runs of ``system_deferred`` started at once, waited to the end; (run ids, most
    train tasks deferred at the same time).

    The jobs run until a release file exists, created once every train task is seen deferred (or two
    minutes passed), so a slow start of some tasks cannot end the first jobs before the last defer.
    """
    from support.process_group import wait_until
    from support.system_airflow import DONE, run_path

    runs = [f"deferred-{i}" for i in range(DEFERRED_RUNS)]
    release = stack.root / "release-deferred"
    for run in runs:
        stack.trigger("system_deferred", run, seconds=12, release_file=str(release))  # 12 epochs at least
    most = 0

    def all_deferred() -> bool:
        nonlocal most
        most = max(most, stack.states("system_deferred", runs).count("deferred"))
        return most == len(runs)

    try:
        with contextlib.suppress(AssertionError):  # not within two minutes: the test says how many were
            wait_until(f"{DEFERRED_RUNS} train tasks deferred at once", all_deferred, 120, 1)
    finally:  # whatever went wrong, the jobs end (else they hold the endpoint's hosts for ten minutes)
        release.touch()

    def all_done() -> bool:
        return all(stack.rest("GET", run_path("system_deferred", r))["state"] in DONE for r in runs)

    wait_until(f"{DEFERRED_RUNS} deferred runs finished", all_done, 300, 2, detail=stack.logs)
    yield runs, most


@pytest.fixture(scope="session", autouse=True)
def retraining(stack: Any) -> Iterator[Any]:
    """The example retraining DAG's three scheduled runs (tests/support/system_retraining.py), started before the
    first test: the scheduler runs them while the other tests run."""
    from support.system_retraining import start_retraining

    started = start_retraining(stack)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def retraining_runs(retraining: Any) -> list[dict[str, Any]]:
    """The three runs, ended (oldest first, as the REST API lists them)."""
    runs: list[dict[str, Any]] = retraining.ended_runs()
    assert not retraining.errors, retraining.errors
    return runs
