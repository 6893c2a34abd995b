"""The built wheel carries everything the package reads at run time, the example DAGs included."""

from __future__ import annotations

import re
import zipfile

import pytest
from support.installed import ROOT, built_wheel

pytestmark = pytest.mark.slow


def test_wheel_contains_data_files_and_marker() -> None:
    wheel = built_wheel()
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "airflow_hetero/definition/data/dlc_training_images.json" in names
    schemas = {
        f"airflow_hetero/lineage/schemas/{p.name}" for p in (ROOT / "airflow_hetero/lineage/schemas").glob("*.json")
    }
    assert len(schemas) == 2 and schemas <= names  # the custom facets' schemas
    assert "airflow_hetero/py.typed" in names
    runtime = {p.name for p in (ROOT / "airflow_hetero" / "runtime").glob("*.py")}
    assert {f"airflow_hetero/runtime/{name}" for name in runtime} <= names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "apache_airflow_provider" in text and "airflow-hetero = airflow_hetero.cli:main" in text


def test_wheel_ships_the_example_dags_and_every_file_they_read() -> None:
    """``airflow-hetero demo`` runs the DAGs from the installed package: each file of the checkout's
    example_dags/ (DAG files, job definition, training code) is in the wheel, byte for byte."""
    wheel = zipfile.ZipFile(built_wheel())
    folder = ROOT / "airflow_hetero" / "example_dags"
    files = sorted(
        p.relative_to(ROOT).as_posix() for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    assert {
        "airflow_hetero/example_dags/hetero_retraining_dag.py",
        "airflow_hetero/example_dags/hetero_model_deploy_dag.py",
        "airflow_hetero/example_dags/hetero_retraining/job.yaml",
        "airflow_hetero/example_dags/hetero_retraining/code/train.py",
    } <= set(files)
    missing = [name for name in files if name not in wheel.namelist()]
    assert missing == []
    assert all(wheel.read(name) == (ROOT / name).read_bytes() for name in files)


def test_the_docs_name_the_pip_the_install_check_resolves_with() -> None:
    """`make test`'s install check (.ci/pip-check) resolves with MIN_PIP; every `pip>=` and "pip N or
    newer" in the README and docs/ names that same pip."""
    (min_pip,) = re.findall(r"^MIN_PIP=(\S+)$", (ROOT / ".ci" / "pip-check").read_text(), re.MULTILINE)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {v for page in pages for v in re.findall(r"pip>=([\d.]+)|pip ([\d.]+) or newer", page.read_text())}
    assert {v for pair in named for v in pair if v} == {min_pip}
