"""The decide example of docs/rightsizing.md runs (in a fresh interpreter) and prints what the page says; the
page's parse-time messages are the policy's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.doc_examples import DOCS, run_example

from airflow_hetero.definition.rightsizing import (
    GroupFacts,
    RightSizing,
    RightSizingError,
    check_policy,
)


def test_decide_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    done, shown = run_example("rightsizing.md", "decide", tmp_path)
    assert done.stdout == shown


@pytest.mark.parametrize(
    "policy",
    [
        {"groups": {"model_group": {"max_count": 2}}},
        {"groups": {"data_group": {"min_count": 3, "max_count": 8}}},
        {"groups": {"data_group": {"min_count": 3, "max_count": 2}}},
        {"groups": {"data_group": {"max_count": 4, "types": ["ml.c5.2xlarge", "ml.m5.xlarge"]}}},
        {"groups": {"data_group": {"max_count": 4}}, "history": 1},
    ],
)
def test_the_pages_messages_are_what_the_check_says(policy: dict[str, object]) -> None:
    text = (DOCS / "rightsizing.md").read_text()
    block = re.search(r"each problem names its field:\n\n```text\n(.*?)```", text, re.S)
    assert block
    groups = {
        "data_group": GroupFacts("ml.c5.xlarge", 2, ("ml.c5.2xlarge",)),
        "train_group": GroupFacts("ml.g5.xlarge", 1),
    }
    with pytest.raises(RightSizingError) as raised:
        check_policy(RightSizing.of(policy), groups)
    assert str(raised.value) in block.group(1).splitlines()


def test_the_pages_dag_parses_with_its_policy() -> None:
    pytest.importorskip("airflow.sdk")
    text = (DOCS / "rightsizing.md").read_text()
    body = re.search(r"```python\n(import pendulum.*?)```", text, re.S)
    assert body
    namespace: dict[str, object] = {"__name__": "rightsizing_page"}
    exec(compile(body.group(1), "rightsizing.md", "exec"), namespace)
    train = namespace["train"]
    assert getattr(train, "rightsizing", None) == {
        "groups": {"data_group": {"min_count": 1, "max_count": 8}},
        "objective": "cost",
        "tolerance": 0.05,
        "mode": "apply",
        "agree_runs": 2,
        "history": 6,
    }


def test_types_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    done, shown = run_example("rightsizing.md", "types", tmp_path)
    assert done.stdout == shown
    assert "data_group: changed (1 x ml.c5.2xlarge -> 1 x ml.c5.xlarge)" in done.stdout
