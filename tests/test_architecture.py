"""The public import paths of the README and docs/architecture.md resolve, and load lazily."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _public_imports(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    block = text[text.index("```python", text.index("ublic import paths")) :]
    block = block[len("```python") : block.index("```", 3)]
    return [line for line in block.strip().splitlines() if line.startswith("from airflow_hetero")]


@pytest.mark.parametrize("page", ["README.md", "docs/architecture.md"])
def test_public_import_paths_resolve(page: str) -> None:
    lines = _public_imports(ROOT / page)
    assert len(lines) >= 8
    subprocess.run([sys.executable, "-c", "\n".join(lines)], check=True, cwd=ROOT)


def test_importing_a_folder_loads_none_of_its_modules() -> None:
    code = (
        "import json, sys, airflow_hetero.definition, airflow_hetero.logs, airflow_hetero.hooks,"
        " airflow_hetero.operators, airflow_hetero.sensors, airflow_hetero.triggers, airflow_hetero.links,"
        " airflow_hetero.local\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('airflow', 'pydantic', 'boto')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    loaded = json.loads(out)
    packages = {
        "airflow_hetero." + p
        for p in ["definition", "logs", "hooks", "operators", "sensors", "triggers", "links", "local"]
    }
    assert set(loaded) == {"airflow_hetero", "airflow_hetero._lazy", *packages}


def test_every_module_sits_in_a_part() -> None:
    top = {p.name for p in (ROOT / "airflow_hetero").iterdir() if p.suffix == ".py"}
    assert top == {"__init__.py", "_compat.py", "_lazy.py", "_retry.py", "cli.py", "demo.py", "runtime.py"}
    assert re.search(r"type = \"acyclic_siblings\"", (ROOT / "pyproject.toml").read_text())
