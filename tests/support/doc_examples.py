"""Run a page's marked example as a user would: in a fresh interpreter, in a folder of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def run_example(page: str, marker: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], str | None]:
    """Run the ``python`` block after ``<!-- example: marker -->`` in ``docs/page``; the finished
    process, and the ``text`` block the page shows as its output (None when it shows none).

    The example gets a validation/price cache of its own; a failing run fails the test with its stderr.
    """
    text = (DOCS / page).read_text(encoding="utf-8")
    match = re.search(rf"<!-- example: {re.escape(marker)} -->\n```python\n(.*?)```", text, re.S)
    assert match, f"the {marker} example is missing from docs/{page}"
    shown = re.match(r"\n\nprints.*?\n\n```text\n(.*?)```", text[match.end() :], re.S)
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
    return done, shown.group(1) if shown else None
