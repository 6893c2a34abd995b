"""Test-wide environment: a throwaway AIRFLOW_HOME and fake AWS credentials.

Set before anything imports Airflow or boto3, so no test can reach a real account
or the user's own Airflow installation.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

_HOME = Path(tempfile.mkdtemp(prefix="airflow-hetero-tests-"))
#: How long an xdist worker waits for the first worker's migration (a few seconds of CPU on a loaded machine).
MIGRATE_WAIT_SECONDS = 300

os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_HOME / 'airflow.db'}"
if int(version("apache-airflow").split(".")[0]) < 3:
    # Airflow 2.11's unit-test configuration picks LocalExecutor, which refuses SQLite (sensors
    # under dag.test() load it); Airflow 3 has no executor setting for dag.test().
    os.environ.setdefault("AIRFLOW__CORE__EXECUTOR", "SequentialExecutor")
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_SESSION_TOKEN"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)
# parse-time validation cache (airflow_hetero.definition.validated): never the user's ~/.cache
os.environ["AIRFLOW_HETERO_CACHE_DIR"] = str(_HOME / "validated-cache")
# The repo root holds benchmarks/, which tests of several folders import (benchmarks.runs_data, ...), so that
# any file runs alone or in any subset (`make test-af34`'s folders). Appended, not prepended: the package under
# test still comes from where it is installed (the system test's wheel, not the checkout).
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parents[1]))

# A stage of `make test` past its limit (.ci/timed --limit) prints every thread's stack of each pytest
# process: with py-spy, or by SIGUSR1 to the pids written here (every xdist worker loads this file).
faulthandler.register(signal.SIGUSR1, all_threads=True)
if os.environ.get("HETERO_STACKS_PIDS"):
    Path(os.environ["HETERO_STACKS_PIDS"], str(os.getpid())).touch()


def _one_botocore_data_loader() -> None:
    """Every botocore session of a test process reads botocore's JSON data through one caching loader.

    A session normally makes a loader of its own, so each new session parses endpoints.json and the
    service model again: about 0.1 s of CPU per boto3 client, and the suite builds well over a thousand
    (each hook, the offline endpoint's own clients, the tests' clients) -- a third of a suite's CPU,
    measured with py-spy. The data read is the same; only the parsing is done once per process (as the
    Amazon provider's async sessions and tests/support/golden_recorder.py share theirs). Child processes
    (``local serve``, the demo, the benchmarks) are untouched. A session with its own ``data_path``
    (``AWS_DATA_PATH``) gets a loader of that path, shared with the sessions of the same path.
    """
    import functools

    import botocore.loaders
    import botocore.session

    loader_of = functools.cache(botocore.loaders.create_loader)

    def register_data_loader(session: botocore.session.Session) -> None:
        session._components.lazy_register_component(
            "data_loader", lambda: loader_of(session.get_config_variable("data_path"))
        )

    botocore.session.Session._register_data_loader = register_data_loader  # type: ignore[method-assign]


_one_botocore_data_loader()
#: Whether support.aws_caller has nothing left to do in this process (see pytest_runtest_setup).
_caller_lookup = {"done": False}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Once the Amazon provider's hook module is imported (by the collection, as a rule), its look-up of the
    operator that builds a client reads frames instead of every frame's source (support.aws_caller)."""
    if not _caller_lookup["done"]:
        from support.aws_caller import install

        _caller_lookup["done"] = install()


@pytest.fixture(autouse=True)
def _fixed_ports(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked ``fixed_ports(PORT, ...)`` runs alone among the tests of those ports on this machine
    (support.loopback)."""
    marker = request.node.get_closest_marker("fixed_ports")
    if marker is None:
        yield
        return
    from support.loopback import fixed_ports

    with fixed_ports(*marker.args):
        yield


@pytest.fixture(scope="session")
def airflow_db(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Migrate the throwaway metadata DB (AIRFLOW_HOME above, one per process) once per test session.

    Under pytest-xdist, ``airflow db migrate`` runs once per test run: the first worker that needs the DB
    migrates its own and keeps a copy beside the workers' temporary folders (one run's, under a lock), and
    the others copy that file (a few MB) instead of migrating theirs (an Airflow start-up and the
    migrations: 3-4 s of CPU each).
    """
    db = _HOME / "airflow.db"
    if not os.environ.get("PYTEST_XDIST_TESTRUNUID"):
        _migrate()
        return
    import shutil

    from support.file_lock import held

    shared = tmp_path_factory.getbasetemp().parent / "migrated-airflow.db"
    with held(shared.with_suffix(".lock"), MIGRATE_WAIT_SECONDS, "the first worker's airflow db migrate"):
        if shared.exists():
            shutil.copyfile(shared, db)
            return
        _migrate()
        partial = shared.with_suffix(".partial")
        shutil.copyfile(db, partial)
        partial.replace(shared)  # whole or absent, should this worker die while copying


def _migrate() -> None:
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True,
        capture_output=True,
        env=os.environ.copy(),
        timeout=300,
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--airflow-free-share",
        choices=("airflow3", "airflow2"),
        help="run only this suite's share of the test files that involve no Airflow (support/airflow_free.py); "
        "`make test` gives each suite its share, so each such file runs once",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--airflow-free-share``: leave out the Airflow-free files the other suite runs (counted as deselected)."""
    share = config.getoption("--airflow-free-share")
    if share is None:
        return
    from support.airflow_free import AIRFLOW_FREE_PARTS, involves_airflow, runs_in

    tests = Path(__file__).resolve().parent
    verdicts: dict[Path, bool] = {}
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        path = item.path.resolve()
        relative = path.relative_to(tests)
        if relative.parts[0] not in AIRFLOW_FREE_PARTS:
            keep.append(item)
            continue
        if path not in verdicts:
            verdicts[path] = involves_airflow(path, tests / "support") or runs_in(relative.as_posix()) == share
        (keep if verdicts[path] else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
