"""The operator, sensor and migration pages' code runs: every Python block parses into DAGs/tasks,
and every job definition in them (YAML blocks and dicts given to the operator) is valid, as is
every request given to it (rendered first, as the task renders it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_hetero.definition.job import load_job
from airflow_hetero.definition.raw_request.training_request import load_request
from airflow_hetero.operators import HeteroTrainingOperator

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ["operator.md", "sensor.md", "migration.md", "failure-semantics.md", "lineage.md", "compatibility.md"]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(page: str, language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall((DOCS / page).read_text()) if lang == language]


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run_and_their_definitions_are_valid(page: str) -> None:
    code = blocks(page, "python")
    assert code, f"{page} has no Python snippets"
    operators = 0
    for body in code:
        namespace: dict[str, Any] = {"__name__": f"docs_{page}"}
        exec(compile(body, f"{page} snippet", "exec"), namespace)
        tasks = [v for v in namespace.values() if hasattr(v, "task_id")]
        for dag in (v for v in namespace.values() if hasattr(v, "task_dict")):
            tasks.extend(dag.task_dict.values())
        for task in tasks:
            if isinstance(task, HeteroTrainingOperator) and isinstance(task.job, dict):
                load_job(task.job)
                operators += 1
            if isinstance(task, HeteroTrainingOperator) and isinstance(task.request, dict):
                context = {"run_id": "manual__1", "ts_nodash": "20260101T000000", "params": task.params.dump()}
                load_request(rendered(task.request, context))
                operators += 1
    if page not in ("sensor.md", "compatibility.md"):
        assert operators, f"{page}: no HeteroTrainingOperator with an inline definition was checked"


def rendered(value: Any, context: dict[str, Any]) -> Any:
    """``value`` with Jinja rendered in every string (a stand-in for the task's own rendering)."""
    import jinja2

    if isinstance(value, str):
        return jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(value).render(context)
    if isinstance(value, list):
        return [rendered(v, context) for v in value]
    if isinstance(value, dict):
        return {k: rendered(v, context) for k, v in value.items()}
    return value


def test_yaml_definitions_on_the_operator_page_are_valid() -> None:
    definitions = [yaml.safe_load(b) for b in blocks("operator.md", "yaml")]
    assert definitions
    for definition in definitions:
        load_job(definition)


def test_readme_python_blocks_run() -> None:
    """The README's DAG and import blocks run as they are (on Airflow 2.11 and 3.x alike)."""
    readme = (DOCS.parent / "README.md").read_text()
    code = [body for lang, body in BLOCK.findall(readme) if lang == "python"]
    assert len(code) >= 2
    tasks = []
    for body in code:
        namespace: dict[str, Any] = {"__name__": "readme"}
        exec(compile(body, "README.md snippet", "exec"), namespace)
        for dag in (v for v in namespace.values() if hasattr(v, "task_dict")):
            tasks.extend(dag.task_dict.values())
    assert [(type(t).__name__, t.task_id, t.job) for t in tasks] == [("HeteroTrainingOperator", "train", "job.yaml")]
