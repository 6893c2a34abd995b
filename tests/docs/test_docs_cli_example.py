"""The summarize example of docs/cli.md runs (in a fresh interpreter) and prints the table, the prices
and the verdict the page shows (counts and utilisation vary between runs; the rest must not)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.doc_examples import run_example

pytestmark = pytest.mark.slow

#: Lines of the shown output that every run prints verbatim.
STABLE = ("group ", "price of ", "  not an AWS price", "utilisation: ", "exit status")


def test_summarize_example_runs_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    done, shown_text = run_example("cli.md", "summarize", tmp_path)
    assert shown_text is not None
    shown, printed = shown_text.splitlines(), done.stdout.splitlines()
    stable = [line for line in shown if line.startswith(STABLE)]
    assert len(stable) >= 6
    for line in stable:
        assert line in printed, line
    assert [line.split()[:3] for line in printed if line.startswith(("data ", "dnn "))][:2] == [
        ["data", "ml.c5.xlarge", "2"],
        ["dnn", "ml.p3.2xlarge", "1"],
    ]
    assert any(line.startswith("Verdict: ") for line in printed)
    assert printed[-1] == "exit status 0"
