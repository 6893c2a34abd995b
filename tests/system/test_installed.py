"""The package under test is the installed wheel, and Airflow's components found it."""

from __future__ import annotations

import json
import re
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


def test_the_deployment_page_shows_the_configuration_the_system_runs_with(stack: Stack) -> None:
    """docs/deployment.md's worked example lists the variables the components get, as set here."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    example = page[page.index("## Worked example") :]
    block = example[example.index("```bash\n") + 8 :]
    block = block[: block.index("```")]
    shown = dict(re.findall(r"^([A-Z_]+)=(\S+)", block, re.MULTILINE))
    assert len(shown) >= 8, shown
    for name, value in shown.items():
        assert name in stack.env, name
        if not re.search(r"[A-Z]+_PORT|<|\{", value):  # no placeholder: the value itself
            assert stack.env[name] == value, (name, stack.env[name])
