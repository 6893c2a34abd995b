"""The runnable example of docs/local.md really runs (in a fresh interpreter, as a user would)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DOC = Path(__file__).parents[2] / "docs" / "local.md"


def test_local_md_example_runs(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- example: local-endpoint -->\n```python\n(.*?)```", text, re.S)
    assert match, "the example block is missing from docs/local.md"
    script = tmp_path / "example.py"
    script.write_text(match.group(1), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Completed ['Starting', 'Downloading', 'Training', 'Uploading', 'Completed']"
    assert lines[1] == "s3://demo/output/hetero-demo/output/model.tar.gz"
    groups = sorted(re.search(r"group=(\w+)", line).group(1) for line in lines[2:])  # type: ignore[union-attr]
    assert groups == ["data", "data", "dnn"]
    assert sum("loss=0.333" in line for line in lines[2:]) == 1
