"""The prices example of docs/instance-groups.md runs (in a fresh interpreter) and prints what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DOC = Path(__file__).parents[2] / "docs" / "instance-groups.md"


def test_prices_example_runs_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- example: prices -->\n```python\n(.*?)```\n\nprints\n\n```text\n(.*?)```", text, re.S)
    assert match, "the prices example is missing from docs/instance-groups.md"
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
    assert done.stdout == match.group(2)
