"""docs/cost.md: the cost command prints what the page shows, the budget line it quotes is the module's, and
the page is in the nav and linked from the README."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from airflow_hetero.cli import main
from airflow_hetero.job.budget import plan_budget

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cost.md"
EXAMPLE = ROOT / "airflow_hetero" / "example_dags" / "hetero_retraining" / "job.yaml"


def test_the_cost_command_prints_what_the_page_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    block = re.search(r"```text\n\$ airflow-hetero (cost [^\n]*)\n(.*?)```", PAGE.read_text(), re.S)
    assert block is not None
    shutil.copy(EXAMPLE, tmp_path / "job.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(block.group(1).split()) == 0
    assert capsys.readouterr().out == block.group(2)


def test_the_quoted_budget_line_is_what_the_operator_logs() -> None:
    quoted = re.search(r"`(Budget: cluster 38\.098 [^`]*)`", PAGE.read_text())
    assert quoted is not None
    plan = plan_budget(250, 12.4, 37.69 + 2 * 0.204, 86400, min_runtime=300, currency="USD")
    assert quoted.group(1) == plan.describe("USD")


def test_the_page_is_in_the_nav_and_the_readme() -> None:
    assert "cost.md" in (ROOT / "mkdocs.yml").read_text()
    assert "docs/cost.md" in (ROOT / "README.md").read_text()
    assert PAGE.read_text().startswith("# Cost, budget and managed spot\n")
