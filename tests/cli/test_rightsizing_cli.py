"""``airflow-hetero render --rightsizing-history FILE``: the counts the next run would use, from a decision as
XCom holds it (the summary task's ``rightsizing`` key), rendered into the request in apply mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.example_jobs import Group, example_job
from support.rightsizing_runs import DATA, PRICES, SIZED_PRICES, record, summary

from airflow_hetero.cli import main
from airflow_hetero.definition.rightsizing import RightSizing
from airflow_hetero.job.rightsizing import decide
from airflow_hetero.job.rightsizing_types import instance_facts
from airflow_hetero.operators.rightsizing_records import record_next, state_of

DEFINITION = example_job(
    image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/train:latest",
    entry_point=None,
    source_dir=None,
    output_path="s3://bucket/models",
    groups=[Group(DATA, "ml.c5.xlarge"), Group("train_group", "ml.g5.xlarge")],
)


def state_after_two_starved_runs(mode: str) -> dict[str, Any]:
    """The summary's ``rightsizing`` XCom after the second of two runs at 1 data host (prep 5 x train)."""
    policy = RightSizing.of({"groups": {DATA: {"max_count": 8}}, "mode": mode})
    first = {"counts": {DATA: 1}, "fingerprint": "fp", "history": [record(1, ratio=5, run_id="r1")], "blocked": {}}
    decision = {**state_of(first, policy, None, PRICES, {DATA: 1}), "mode": mode, "objective": "cost"}
    _, upcoming = record_next(summary(1, ratio=5, name="r2"), decision, "r2")
    return upcoming


@pytest.mark.parametrize(("mode", "count"), [("apply", 2), ("recommend", 1)])
def test_render_shows_and_applies_the_next_runs_counts(
    mode: str, count: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(DEFINITION))
    state = state_after_two_starved_runs(mode)
    assert state["recommended"] == {DATA: 2} and state["evidence"] == 2
    history = tmp_path / "rightsizing.json"
    history.write_text(json.dumps(state))
    assert main(["render", str(job), "--rightsizing-history", str(history)]) == 0
    out, err = capsys.readouterr()
    groups = json.loads(out)["ResourceConfig"]["InstanceGroups"]
    assert [(g["InstanceGroupName"], g["InstanceCount"]) for g in groups] == [(DATA, count), ("train_group", 1)]
    assert f"the next run uses: {DATA}={count}" in err
    if mode == "recommend":  # the evidence says grow; nothing changes, the decision says so
        assert f"Right-sizing (recommend, objective cost): 2 run(s) of evidence\n  {DATA}: changed (1 -> 2)" in err


def test_render_with_another_policy_and_its_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(DEFINITION))
    history = tmp_path / "rightsizing.json"
    history.write_text(json.dumps(state_after_two_starved_runs("recommend")))
    pinned = json.dumps({"groups": {DATA: {"min_count": 1, "max_count": 1}}, "mode": "apply"})
    assert main(["render", str(job), "--rightsizing-history", str(history), "--rightsizing", pinned]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["ResourceConfig"]["InstanceGroups"][0]["InstanceCount"] == 1
    assert f"{DATA}: refused_bound (1): would grow to 2; max_count is 1" in err
    unknown = json.dumps({"groups": {"model_group": {"max_count": 2}}})
    assert main(["render", str(job), "--rightsizing-history", str(history), "--rightsizing", unknown]) == 2
    assert (
        "--rightsizing: rightsizing.groups.model_group: the job has no such instance group" in capsys.readouterr().err
    )
    history.write_text("[1, 2]")
    assert main(["render", str(job), "--rightsizing-history", str(history)]) == 2
    assert "--rightsizing-history: cannot read" in capsys.readouterr().err


@pytest.mark.parametrize(("mode", "kind"), [("apply", "ml.c5.xlarge"), ("recommend", "ml.c5.2xlarge")])
def test_render_shows_and_applies_a_move_between_types(
    mode: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs of 1 data host of ml.c5.2xlarge at 25 % (waiting on the trainer): objective cost, at min_count,
    the decision moves it to ml.c5.xlarge (a fallback type of the group, listed in its bounds' types)."""
    data, trainer = DEFINITION["instance_groups"]
    data = {**data, "instance_type": "ml.c5.2xlarge", "fallback_instance_types": ["ml.c5.xlarge"]}
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({**DEFINITION, "instance_groups": [data, trainer]}))
    types = ["ml.c5.2xlarge", "ml.c5.xlarge"]
    policy = RightSizing.of({"groups": {DATA: {"max_count": 4, "types": types}}, "mode": mode})
    runs = [record(1, ratio=0.25, data_type="ml.c5.2xlarge", run_id=f"r{i}") for i in range(2)]
    facts = instance_facts(types)
    first = decide(
        policy, {DATA: 1}, runs[:1], fingerprint="fp", prices=SIZED_PRICES, types={DATA: types[0]}, facts=facts
    )
    extra = {"written_types": {DATA: types[0]}, "facts": facts}
    state = {**state_of(first.as_dict(), policy, None, SIZED_PRICES, {DATA: 1}, extra=extra), "history": runs}
    history = tmp_path / "rightsizing.json"
    history.write_text(json.dumps(state))
    assert main(["render", str(job), "--rightsizing-history", str(history)]) == 0
    out, err = capsys.readouterr()
    groups = json.loads(out)["ResourceConfig"]["InstanceGroups"]
    assert [(g["InstanceType"], g["InstanceCount"]) for g in groups] == [(kind, 1), ("ml.g5.xlarge", 1)]
    assert f"{DATA}: changed (1 x ml.c5.2xlarge -> 1 x ml.c5.xlarge): the last 2 runs found it under-used" in err
    uses = f"{DATA}=1 x ml.c5.xlarge" if mode == "apply" else f"{DATA}=1"
    assert f"the next run uses: {uses}\n" in err
