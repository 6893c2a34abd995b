"""The prices example of docs/instance-groups.md runs (in a fresh interpreter) and prints what the page says."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.doc_examples import run_example

pytestmark = pytest.mark.slow


def test_prices_example_runs_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    done, shown = run_example("instance-groups.md", "prices", tmp_path)
    assert done.stdout == shown
