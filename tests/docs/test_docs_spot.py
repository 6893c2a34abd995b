"""docs/cost.md, Managed spot: its example definition is valid, renders and is refused as the page shows; the
offline endpoint's interruption example runs and prints what the page shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from airflow_hetero.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cost.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _section(title: str) -> str:
    """The text of one ``## title`` section (the page has other sections: the budget's)."""
    text = PAGE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(_section("Managed spot")) if lang == language]


def test_the_spot_example_validates_renders_and_is_refused_as_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (definition,) = _blocks("yaml")
    valid, refused = _blocks("text")[:2]  # then the checkpoint layout and the offline example's output
    (rendered,) = _blocks("json")
    monkeypatch.chdir(tmp_path)
    Path("spot-job.yaml").write_text(definition)
    assert main(["validate", "spot-job.yaml"]) == 0
    assert capsys.readouterr().out == valid
    assert main(["render", "spot-job.yaml", "--job-name", "weekly-spot-1", "--region", "us-east-1"]) == 0
    request = json.loads(capsys.readouterr().out)
    shown = json.loads(rendered)
    assert {member: request[member] for member in shown} == shown
    data = yaml.safe_load(definition)
    Path("spot-job.yaml").write_text(yaml.safe_dump({**data, "max_wait": 3600}))
    assert main(["validate", "spot-job.yaml"]) == 2
    assert capsys.readouterr().err == refused


@pytest.mark.slow
def test_the_offline_interruption_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    """Every host of both groups restarted once from its own checkpoint folder, billed at the stand-in saving."""
    from support.doc_examples import run_example

    done, shown = run_example("cost.md", "spot-offline", tmp_path)
    assert shown is not None and done.stdout == shown


def test_the_offline_options_are_the_endpoints() -> None:
    """The options table names every spot option LocalEndpoint (its SpotOptions) and local serve take, with
    their defaults."""
    from dataclasses import fields

    from airflow_hetero.local import SpotOptions
    from airflow_hetero.sagemaker_facts import STAND_IN_SPOT_SAVING

    section = _section("Managed spot")
    spot = [item.name for item in fields(SpotOptions) if item.name != "seed"]  # the seed is the endpoint's
    assert len(spot) == 6
    for name in spot:
        flag = "--checkpoint-sync-interval" if name == "checkpoint_sync_interval" else f"--spot-{name}"
        assert f"`{name}" in section and flag.replace("_", "-") in section
    assert f"| `{STAND_IN_SPOT_SAVING:g}` |" in section and "**stand-in**" in section


def test_the_page_is_in_the_nav() -> None:
    assert "cost.md" in (PAGE.parents[1] / "mkdocs.yml").read_text()
