"""The built wheel carries everything the package reads at run time."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_wheel_contains_data_files_and_marker(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("airflow_hetero-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "airflow_hetero/definition/data/dlc_training_images.json" in names
    assert "airflow_hetero/py.typed" in names
    assert "airflow_hetero/runtime.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "apache_airflow_provider" in text and "airflow-hetero = airflow_hetero.cli:main" in text
