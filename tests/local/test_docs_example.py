"""The runnable example of docs/local.md really runs (in a fresh interpreter, as a user would)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.doc_examples import run_example

pytestmark = pytest.mark.slow


def test_local_md_example_runs(tmp_path: Path) -> None:
    done, _ = run_example("local.md", "local-endpoint", tmp_path)
    lines = done.stdout.splitlines()
    assert lines[0] == "Completed ['Starting', 'Downloading', 'Training', 'Uploading', 'Completed']"
    assert lines[1] == "s3://demo/output/hetero-demo/output/model.tar.gz"
    groups = sorted(re.search(r"group=(\w+)", line).group(1) for line in lines[2:])  # type: ignore[union-attr]
    assert groups == ["data", "data", "dnn"]
    assert sum("loss=0.333" in line for line in lines[2:]) == 1


def test_local_md_capacity_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    done, shown = run_example("local.md", "capacity", tmp_path)
    assert shown is not None
    assert done.stdout == shown


def test_capacity_md_operator_example_falls_back_as_the_page_shows(tmp_path: Path) -> None:
    done, shown = run_example("capacity.md", "operator", tmp_path)
    assert shown is not None
    assert done.stdout.endswith(shown)  # the task log may come first (Airflow 3 logs to stdout)


def test_cost_md_budget_example_stops_at_the_cap_as_the_page_shows(tmp_path: Path) -> None:
    done, shown = run_example("cost.md", "budget", tmp_path)
    assert shown is not None
    assert done.stdout.endswith(shown)  # the task log may come first (Airflow 3 logs to stdout)
