"""A test file runs alone or in any subset: what it imports does not depend on a file collected before it.

The tests that import the repo's ``benchmarks`` package found it only when a file that put the repo root on
``sys.path`` was collected first (so ``make test-af34``, which runs some folders, could not import the Runs
view's tests); tests/conftest.py now puts it there for every file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: How long collecting one file may take in a fresh interpreter on a loaded machine.
COLLECT_TIMEOUT = 120


def test_a_file_that_imports_the_benchmarks_is_collected_alone() -> None:
    # -P: the current directory (the repo root) is not put on sys.path, as with the venv's pytest command
    argv = [sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only"]
    done = subprocess.run(
        [*argv, "tests/definition/test_hostile_definitions.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=COLLECT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "tests collected" in done.stdout, done.stdout[-2000:]
