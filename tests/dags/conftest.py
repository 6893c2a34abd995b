"""Fixtures of the whole-DAG tests: the throwaway metadata DB, migrated once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """Migrate the throwaway metadata DB (AIRFLOW_HOME from tests/conftest.py) once per test session."""
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True,
        capture_output=True,
        env=os.environ.copy(),
        timeout=300,
    )

