"""Airflow sees the package as a provider, with its extra links."""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib.metadata import distribution, entry_points

import airflow_hetero


def test_provider_entry_point_resolves_to_get_provider_info() -> None:
    (entry,) = [e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("airflow_hetero")]
    assert entry.load() is airflow_hetero.get_provider_info
    info = airflow_hetero.get_provider_info()
    assert info["package-name"] == distribution("airflow-hetero").metadata["Name"] == "airflow-hetero"
    assert info["name"] and info["description"]


def test_registered_extra_links_import_and_are_declared_on_the_operator() -> None:
    from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator

    declared = {
        f"{type(link).__module__}.{type(link).__name__}"
        for operator in (HeteroTrainingOperator, HeteroLogSummaryOperator)
        for link in operator.operator_extra_links
    }
    for path in airflow_hetero.get_provider_info()["extra-links"]:
        module, name = path.rsplit(".", 1)
        assert hasattr(importlib.import_module(module), name), path
        assert path in declared


def test_console_script_is_installed() -> None:
    (entry,) = [e for e in entry_points(group="console_scripts") if e.name == "airflow-hetero"]
    assert entry.value == "airflow_hetero.cli:main"


def test_airflow_providers_list_shows_the_package() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "list", "-o", "plain"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "airflow-hetero" in proc.stdout
