"""The package under test is the installed wheel, and Airflow's components found it."""

from __future__ import annotations

import json
import sys
from importlib.metadata import distribution
from pathlib import Path

from support.system_airflow import Stack


def test_the_package_is_the_installed_wheel_not_the_checkout(stack: Stack) -> None:
    import airflow_hetero

    source = Path(__file__).resolve().parents[2] / "airflow_hetero"
    installed = Path(airflow_hetero.__file__).resolve()
    assert installed.is_relative_to(Path(sys.prefix).resolve()), installed
    assert not installed.is_relative_to(source), installed
    direct = distribution("airflow-hetero").read_text("direct_url.json")
    assert direct is None or not json.loads(direct).get("dir_info", {}).get("editable")


def test_every_component_is_up_and_the_plugin_is_registered(stack: Stack) -> None:
    health = stack.health()
    for component in ("metadatabase", "scheduler", "triggerer", "dag_processor"):
        assert health[component]["status"] == "healthy", health
    plugins = stack.rest("GET", "/api/v2/plugins")["plugins"]
    (plugin,) = [p for p in plugins if p["name"] == "airflow_hetero"]
    assert plugin["fastapi_apps"][0]["url_prefix"] == "/hetero"
    providers = stack.rest("GET", "/api/v2/providers")["providers"]
    assert "airflow-hetero" in {p["package_name"] for p in providers}
