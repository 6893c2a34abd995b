"""docs/queue.md, the operator's part: its example (a task through the offline queue) prints what the page shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.doc_examples import run_example

pytestmark = pytest.mark.slow


def test_the_queue_mode_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    done, shown = run_example("queue.md", "queue-operator", tmp_path)
    assert shown is not None
    assert done.stdout.endswith(shown)  # the task log may come first (Airflow 3 logs to stdout)


def test_the_operator_page_and_the_readme_link_the_queue_page() -> None:
    root = Path(__file__).resolve().parents[2]
    assert "queue.md" in (root / "docs" / "operator.md").read_text()
    assert "docs/queue.md" in (root / "README.md").read_text()
