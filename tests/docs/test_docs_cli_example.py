"""The summarize example of docs/cli.md runs (in a fresh interpreter) and prints the table, the prices
and the verdict the page shows (counts and utilisation vary between runs; the rest must not)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DOC = Path(__file__).parents[2] / "docs" / "cli.md"
#: Lines of the shown output that every run prints verbatim.
STABLE = ("group ", "price of ", "  not an AWS price", "utilisation: ", "exit status")


def test_summarize_example_runs_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- example: summarize -->\n```python\n(.*?)```\n\nprints.*?\n\n```text\n(.*?)```", text, re.S)
    assert match, "the summarize example is missing from docs/cli.md"
    script = tmp_path / "example.py"
    script.write_text(match.group(1), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
        env={**os.environ, "AIRFLOW_HETERO_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr
    shown, printed = match.group(2).splitlines(), done.stdout.splitlines()
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
