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


def test_provider_info_lists_every_part_and_a_documentation_url() -> None:
    info = airflow_hetero.get_provider_info()
    modules = {
        kind: [m for entry in info[kind] for m in entry["python-modules"]]
        for kind in ("hooks", "operators", "sensors", "triggers")
    }
    assert modules == {
        "hooks": ["airflow_hetero.hooks.training"],
        "operators": ["airflow_hetero.operators.training", "airflow_hetero.operators.log_summary"],
        "sensors": ["airflow_hetero.sensors.training"],
        "triggers": ["airflow_hetero.triggers.training"],
    }
    for names in modules.values():
        for name in names:
            importlib.import_module(name)
    (integration,) = info["integrations"]
    assert {entry["integration-name"] for kind in modules for entry in info[kind]} == {integration["integration-name"]}
    assert integration["external-doc-url"].startswith("https://docs.aws.amazon.com/sagemaker/")
    urls = dict(u.split(", ", 1) for u in distribution("airflow-hetero").metadata.get_all("Project-URL") or [])
    assert info["documentation-url"] == urls["Documentation"]
    assert info["documentation-url"].startswith("https://")


def test_provider_info_passes_airflows_own_schema() -> None:
    import json
    from pathlib import Path

    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(airflow_hetero.get_provider_info(), schema)


def test_the_package_ships_its_license_and_changelog() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert "Apache License" in (root / "LICENSE").read_text() and "Version 2.0" in (root / "LICENSE").read_text()
    assert "## [Unreleased]" in (root / "CHANGELOG.md").read_text()
    assert distribution("airflow-hetero").metadata["License-Expression"] == "Apache-2.0"


def test_airflow_providers_triggers_lists_the_trigger() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "triggers", "-o", "plain"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "airflow-hetero" in proc.stdout and "airflow_hetero.triggers.training" in proc.stdout
