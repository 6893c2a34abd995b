"""docs/architecture.md's example of adding a pre-submit policy runs, as a step of a pipeline."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.operators.pipeline import DIRECT, QUEUED, Draft, FitBudget, NextCluster, StepContext

PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _example() -> dict[str, Any]:
    text = PAGE.read_text()
    section = text[text.index("### Adding a pre-submit policy") :]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "the section has no python example"
    namespace: dict[str, Any] = {}
    exec(compile(block.group(1), "architecture.md", "exec"), namespace)
    return namespace


def _draft(*counts: int) -> Draft:
    groups = [
        {"InstanceGroupName": f"g{i}", "InstanceType": "ml.c5.xlarge", "InstanceCount": n} for i, n in enumerate(counts)
    ]
    job: Any = SimpleNamespace(fallbacks={})
    return Draft(job=job, name="job-1", request={"ResourceConfig": {"InstanceGroups": groups}})


def test_the_example_step_ends_the_send_phase_and_refuses_a_large_cluster() -> None:
    capped = _example()["CAPPED"]
    assert capped.send[:2] == DIRECT.send == (NextCluster, FitBudget)
    task: Any = SimpleNamespace(task_id="train", max_cost=None)
    run: Any = SimpleNamespace(chain=None)
    at = StepContext(task=task, run=run)
    small = _draft(2, 3)
    assert capped.finish(at, small) == small  # no chain, no budget: the request as built
    with pytest.raises(AirflowFailException, match="11 instances, at most 10"):
        capped.finish(at, _draft(8, 3))


def test_the_pipelines_state_their_order() -> None:
    """The order the docs draw: right-size, build, next cluster, budget; queue mode without the cluster."""
    assert [s.__name__ for s in (*DIRECT.job, *DIRECT.named, *DIRECT.send)] == [
        "RightSize",
        "BuildRequest",
        "NextCluster",
        "FitBudget",
    ]
    assert [s.__name__ for s in (*QUEUED.job, *QUEUED.named, *QUEUED.send)] == [
        "RightSize",
        "NoFallbacks",
        "BuildRequest",
        "FitBudget",
    ]
