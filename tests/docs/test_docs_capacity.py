"""docs/capacity.md: its planner example prints what the page says, and its YAML fallbacks are valid."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from airflow_hetero.definition.rules.fallbacks import list_problems

PAGE = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(PAGE.read_text()) if lang == language]


def test_the_planner_example_prints_what_the_page_shows(capsys: pytest.CaptureFixture[str]) -> None:
    (example,) = [code for code in blocks("python") if "CapacityPlan(" in code]
    exec(compile(example, str(PAGE), "exec"), {})
    shown = re.search(r"prints\n\n```text\n(.*?)```", PAGE.read_text(), re.S)
    assert shown is not None
    assert capsys.readouterr().out == shown.group(1)


def test_the_yaml_fallbacks_pass_the_checks() -> None:
    (groups,) = [yaml.safe_load(body)["instance_groups"] for body in blocks("yaml")]
    for group in groups:
        assert list(list_problems(group.get("fallback_instance_types", []), group["instance_type"])) == []


def test_the_page_is_in_the_nav() -> None:
    assert "capacity.md" in (PAGE.parents[1] / "mkdocs.yml").read_text()
