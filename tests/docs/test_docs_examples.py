"""The Python examples in the docs run and print what the docs say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: Pages whose python blocks run as they are (top to bottom, sharing one namespace per page).
RUNNABLE = ["getting-started.md", "request.md"]
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("page", RUNNABLE)
def test_python_blocks_run(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = _BLOCK.findall((DOCS / page).read_text())
    assert blocks, f"{page} has no python example"
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, f"{page}", "exec"), namespace)


def test_getting_started_error_output_is_real(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = _BLOCK.findall((DOCS / "getting-started.md").read_text())
    namespace: dict[str, object] = {}
    for block in blocks[:2]:
        exec(compile(block, "getting-started.md", "exec"), namespace)
    printed = capsys.readouterr().out
    shown = re.search(r"prints\n\n```text\n(.*?)```", (DOCS / "getting-started.md").read_text(), re.S)
    assert shown is not None
    for line in shown.group(1).splitlines():
        head = line.split("allowed: ...")[0]
        assert head in printed, line
