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
    from airflow_hetero.links import DeferredLink
    from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator

    real = [
        link.link() if isinstance(link, DeferredLink) else link  # Airflow 3: a stand-in for the real link
        for operator in (HeteroTrainingOperator, HeteroLogSummaryOperator)
        for link in operator.operator_extra_links
    ]
    declared = {f"{type(link).__module__}.{type(link).__name__}" for link in real}
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
        "hooks": ["airflow_hetero.hooks.training", "airflow_hetero.hooks.batch"],
        "operators": ["airflow_hetero.operators.training", "airflow_hetero.operators.log_summary"],
        "sensors": ["airflow_hetero.sensors.training"],
        "triggers": ["airflow_hetero.triggers.training", "airflow_hetero.triggers.queue"],
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


def test_the_training_operators_link_stand_ins_serialize_as_the_real_links_and_build_their_urls() -> None:
    """Airflow 3 serializes a link's name and XCom key, and the worker calls its get_link: a stand-in
    must give what the real link gives for each."""
    from airflow_hetero._compat import AIRFLOW_V_3
    from airflow_hetero.links import DeferredLink, training_links
    from airflow_hetero.links import training as link_classes

    links = training_links()
    reals = [getattr(link_classes, name)() for name in ("SageMakerTrainingJobLink", "TrainingJobLogsLink")]
    if not AIRFLOW_V_3:  # Airflow 2.11 serializes the class path: the real links themselves
        assert [type(link) for link in links] == [type(real) for real in reals]
        return
    assert all(isinstance(link, DeferredLink) for link in links)
    assert [(link.name, link.xcom_key) for link in links] == [(real.name, real.xcom_key) for real in reals]
    stored = {"job_name": "my-job", "region": "eu-west-1"}
    from unittest import mock

    with mock.patch.object(link_classes.XCom, "get_value", return_value=stored):
        got = [link.get_link(mock.Mock(), ti_key=mock.Mock()) for link in links]
    assert got == [
        link_classes.training_job_url("eu-west-1", "my-job"),
        link_classes.training_logs_url("eu-west-1", "my-job"),
    ]
