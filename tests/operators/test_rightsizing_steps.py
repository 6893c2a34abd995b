"""The operator's ``rightsizing=``: checked at DAG parse (against the job when both are plain data), kept as a
template field, rendered and checked when the task runs; the evidence it reads (the previous decision and the
summary's record) and what resets it; the summary's record and next decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
import yaml
from support.rightsizing_runs import DATA, PRICES, SIZED_PRICES, record, summary

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.definition.rightsizing import GroupBounds, RightSizing
from airflow_hetero.job.rightsizing import next_run_lines
from airflow_hetero.operators import HeteroTrainingOperator
from airflow_hetero.operators import rightsizing_steps as steps
from airflow_hetero.operators.direct_run import finished
from airflow_hetero.operators.rightsizing_records import evidence, record_next, state_of

JOB: dict[str, Any] = yaml.safe_load((Path(__file__).parents[1] / "rule_examples.yaml").read_text())["base"]
CPU = "instance_group_1"  # 2 x ml.c5.18xlarge in JOB


def operator(**kwargs: Any) -> HeteroTrainingOperator:
    kwargs.setdefault("deferrable", False)
    return HeteroTrainingOperator(task_id="train", aws_conn_id=None, **kwargs)


def test_the_policy_is_checked_against_the_job_at_parse_in_both_forms() -> None:
    op = operator(job=JOB, rightsizing=RightSizing(groups={CPU: GroupBounds(min_count=1, max_count=4)}))
    assert "rightsizing" in op.template_fields
    assert op.rightsizing == {
        "groups": {CPU: {"min_count": 1, "max_count": 4}},
        "objective": "cost",
        "tolerance": 0.05,
        "mode": "recommend",
        "agree_runs": 2,
        "history": 6,
    }
    with pytest.raises(ValueError, match=r"rightsizing\.groups\.data_group: the job has no such instance group"):
        operator(job=JOB, rightsizing={"groups": {"data_group": {"max_count": 4}}})
    with pytest.raises(ValueError, match=r"rightsizing\.groups\.instance_group_1: the job runs 2 instances, outside"):
        operator(job=JOB, rightsizing={"groups": {CPU: {"min_count": 3, "max_count": 4}}})
    with pytest.raises(ValueError, match=r"rightsizing\.mode: "):
        operator(job=JOB, rightsizing={"groups": {CPU: {"max_count": 4}}, "mode": "always"})
    with pytest.raises(ValueError, match="a RightSizing or a dict"):
        operator(job=JOB, rightsizing=["data_group"])


def test_a_templated_policy_waits_for_rendering_and_then_fails_the_task() -> None:
    op = operator(job=JOB, rightsizing={"groups": {CPU: {"max_count": 4}}, "mode": "{{ params.mode }}"})
    op.rightsizing = {"groups": {CPU: {"max_count": 4}}, "mode": "sometimes"}  # as rendered
    with pytest.raises(AirflowFailException, match=r"Task train: rightsizing\.mode: "):
        steps.rightsizing_policy(op)
    op.rightsizing = {"groups": {"nope": {"max_count": 4}}}
    with pytest.raises(AirflowFailException, match=r"rightsizing\.groups\.nope: the job has no such instance group"):
        steps.rightsizing_policy(op)


def test_without_a_summary_task_the_task_fails_saying_what_records_the_runs() -> None:
    op = operator(job=JOB, rightsizing={"groups": {CPU: {"max_count": 4}}})
    with pytest.raises(AirflowFailException, match="HeteroLogSummaryOperator with training_task_id='train'"):
        steps.summary_task_id(op, RightSizing.of(op.rightsizing or {}))
    named = RightSizing.of({"groups": {CPU: {"max_count": 4}}, "summary_task_id": "summarize"})
    assert steps.summary_task_id(op, named) == "summarize"


def test_the_fingerprint_is_the_job_as_written_without_the_managed_counts() -> None:
    op = operator(job=JOB, rightsizing={"groups": {CPU: {"max_count": 4}}})
    other = operator(
        job={**JOB, "instance_groups": [{**JOB["instance_groups"][0], "instance_count": 3}, JOB["instance_groups"][1]]}
    )
    other.rightsizing_source = other.job
    assert steps.fingerprint(op, [CPU]) == steps.fingerprint(other, [CPU])
    assert steps.fingerprint(op, [CPU]) != steps.fingerprint(other, [])


def test_the_evidence_the_next_run_reads() -> None:
    first = record(1, ratio=5, run_id="r1")
    previous = {"run_id": "r2", "fingerprint": "fp", "counts": {DATA: 2}, "history": [first], "blocked": {DATA: [3]}}
    second = record(2, ratio=5, run_id="r2")
    history, reset, counts, blocked = evidence(previous, second, "fp", {DATA: 1}, "apply")
    assert [r["run_id"] for r in history] == ["r1", "r2"] and reset is None
    assert counts == {DATA: 2} and blocked == {DATA: [3]}  # apply: the counts the previous run used
    assert evidence(previous, second, "fp", {DATA: 1}, "recommend")[2] == {DATA: 1}  # recommend: as written
    history, reset, counts, blocked = evidence(previous, first, "fp", {DATA: 1}, "apply")  # r2 left no record
    assert history == [] and reset == "run r2 left no record (its summary task did not record it)"
    history, reset, counts, blocked = evidence(previous, second, "changed", {DATA: 1}, "apply")
    assert counts == {DATA: 1} and blocked == {}  # another definition: its counts as written, nothing undone
    assert evidence(None, first, "fp", {DATA: 1}, "apply") == ([first], None, {DATA: 1}, {})


def test_the_summary_records_the_run_and_decides_the_next() -> None:
    policy = RightSizing.of({"groups": {DATA: {"max_count": 8}}, "mode": "apply"})
    made = {"counts": {DATA: 1}, "fingerprint": "fp", "history": [record(1, ratio=5, run_id="r1")], "blocked": {}}
    decision = {**state_of(made, policy, 1.0, PRICES, {DATA: 1}), "mode": "apply", "objective": "cost"}
    run = summary(1, ratio=5, name="job-2")
    record_, upcoming = record_next(run, decision, "r2")
    assert record_["run_id"] == "r2" and record_["job_name"] == "job-2" and record_["outcome"] == "completed"
    assert record_["groups"][DATA] == {
        "type": "ml.c5.xlarge",
        "count": 1,
        "state": "saturated",
        "busy_percent": 100.0,
        "resource": "cpu",
    }
    assert upcoming["counts"] == {DATA: 2} and upcoming["evidence"] == 2 and upcoming["max_cost"] == 1.0
    assert upcoming["policy"]["mode"] == "apply" and upcoming["prices"] == PRICES


def short_of(op: HeteroTrainingOperator) -> Any:
    """The task's result dict's short form of its run's decision."""
    assert op.run is not None
    return finished(op, op.run, {})["rightsizing"]


def test_a_resumed_task_reuses_its_decision() -> None:
    op = operator(job=JOB, rightsizing={"groups": {CPU: {"max_count": 4}}, "mode": "apply"})
    ti = MagicMock(run_id="r5", task_id="train", map_index=-1)
    ti.xcom_pull.return_value = {"run_id": "r5", "mode": "apply", "counts": {CPU: 3}}
    job = MagicMock()
    job.build.return_value = {"ResourceConfig": {"InstanceGroups": [{"InstanceGroupName": CPU, "InstanceCount": 2}]}}
    counted = steps.rightsized(op, op.new_run({"ti": ti}), job)  # type: ignore[arg-type]
    assert counted.build(job_name="j", region="r")["ResourceConfig"]["InstanceGroups"][0]["InstanceCount"] == 3
    ti.xcom_push.assert_not_called()
    assert short_of(op) == {
        "mode": "apply",
        "counts": {CPU: 3},
        "recommended": None,
        "types": None,
        "recommended_types": None,
        "actions": {},
    }


def test_the_instance_groups_page_shows_the_next_runs_decision() -> None:
    from airflow_hetero.plugins.page import render_page

    run = summary(1, ratio=5, name="job-2")
    shown = {**run, "unmapped_hosts": [], "unmapped": None, "problems": [], "errors": 0, "warnings": 0}
    shown["rightsizing"] = {
        "mode": "recommend",
        "next": {DATA: 1},
        "lines": [
            "Right-sizing (recommend, objective cost): the next run uses data_group=1",
            "  data_group: <b>kept</b>",
        ],
    }
    page = render_page(shown, where="w")
    assert "<b>Right-sizing (recommend, objective cost): the next run uses data_group=1</b>" in page
    assert "<li>data_group: &lt;b&gt;kept&lt;/b&gt;</li>" in page  # escaped: group names come from the job
    assert "Right-sizing" not in render_page(run, where="w")


def test_the_task_decides_from_earlier_xcoms_and_resets_on_a_run_without_a_record() -> None:
    """decide_now with a task instance whose earlier runs pushed a decision (r2) and a record: of r2, or of an
    older run (r2's summary did not run)."""
    from airflow_hetero.job.rightsizing import record_of_summary

    cpu = {**JOB["instance_groups"][0], "instance_count": 1, "instance_type": "ml.c5.xlarge"}  # as the records ran
    job = {**JOB, "instance_groups": [cpu, JOB["instance_groups"][1]]}
    policy = {"groups": {CPU: {"max_count": 4}}, "mode": "apply", "summary_task_id": "summarize"}
    op = operator(job=job, rightsizing=policy)
    fingerprint = steps.fingerprint(op, [CPU])
    hook = MagicMock()
    hook.training_prices.return_value = {t: MagicMock(per_hour=p) for t, p in PRICES.items()}  # the records' types
    op.make_hook = lambda: hook  # type: ignore[method-assign]

    def starved(run_id: str) -> dict[str, Any]:
        run = summary(1, ratio=5, name=run_id)
        run["groups"] = {CPU if g == DATA else g: v for g, v in run["groups"].items()}
        run["verdict"]["suggestion"]["group"] = CPU
        return record_of_summary(run, {"fingerprint": fingerprint, "counts": {CPU: 1}}, run_id)

    previous = {"run_id": "r2", "fingerprint": fingerprint, "counts": {CPU: 1}, "history": [starved("r1")]}

    def ti_with(record: dict[str, Any]) -> MagicMock:
        pulled = {("train", "rightsizing"): previous, ("summarize", "rightsizing_record"): record}
        ti = MagicMock(run_id="r3", map_index=-1)
        ti.xcom_pull.side_effect = lambda task_ids, key, **_: pulled.get((task_ids, key))
        return ti

    decided = steps.decide_now(op, op.new_run({"ti": ti_with(starved("r2"))}))  # type: ignore[arg-type]
    assert decided["counts"] == {CPU: 2} and decided["evidence"] == 2 and decided["run_id"] == "r3"
    assert decided["groups"][0]["action"] == "changed" and decided["written"] == {CPU: 1}
    reset = steps.decide_now(op, op.new_run({"ti": ti_with(starved("r1"))}))  # type: ignore[arg-type]
    assert reset["counts"] == {CPU: 1} and reset["evidence"] == 0
    assert reset["reset"] == "run r2 left no record (its summary task did not record it)"
    hook.training_prices.side_effect = RuntimeError("no pricing here")  # the decision stands without prices
    unpriced = steps.decide_now(op, op.new_run({"ti": ti_with(starved("r2"))}))  # type: ignore[arg-type]
    assert unpriced["prices"] == {} and unpriced["groups"][0]["action"] == "kept"
    assert "no price or run length" in unpriced["groups"][0]["reason"]


def test_the_task_moves_a_groups_type_submits_it_and_the_summary_carries_it() -> None:
    """A data group of 1 x ml.c5.2xlarge at 25 % in two runs (objective cost, at min_count): the task decides
    ml.c5.xlarge from the XComs, submits it, and the summary's next decision keeps it as the current type."""
    from airflow_hetero.job.rightsizing import record_of_summary

    big, small = "ml.c5.2xlarge", "ml.c5.xlarge"
    cpu = {**JOB["instance_groups"][0], "instance_count": 1, "instance_type": big}
    job = {**JOB, "instance_groups": [cpu, JOB["instance_groups"][1]]}
    bounds = {"min_count": 1, "max_count": 4, "types": [big, small]}
    policy = {"groups": {CPU: bounds}, "mode": "apply", "summary_task_id": "summarize"}
    op = operator(job=job, rightsizing=policy, fallback_instance_types={CPU: [small]})
    fingerprint = steps.fingerprint(op, [CPU])
    hook = MagicMock()
    hook.training_prices.side_effect = lambda types, _: {
        t: MagicMock(per_hour=SIZED_PRICES.get(t, 40.0)) for t in types
    }  # the trainer's ml.p3dn.24xlarge: 40 USD/h
    op.make_hook = lambda: hook  # type: ignore[method-assign]

    def idle(run_id: str, kind: str = big, **kwargs: Any) -> dict[str, Any]:
        run = summary(1, ratio=0.25, name=run_id, data_type=kind, **kwargs)
        run["groups"] = {CPU if g == DATA else g: v for g, v in run["groups"].items()}
        run["groups"]["train_group"]["instance_type"] = JOB["instance_groups"][1]["instance_type"]  # as the job
        run["verdict"] = {
            **run["verdict"],
            "groups": {CPU if g == DATA else g: v for g, v in run["verdict"]["groups"].items()},
        }
        return run

    made = {"fingerprint": fingerprint, "counts": {CPU: 1}, "types": {CPU: big}}
    previous = {"run_id": "r2", **made, "history": [record_of_summary(idle("r1"), made, "r1")]}
    pulled = {
        ("train", "rightsizing"): previous,
        ("summarize", "rightsizing_record"): record_of_summary(idle("r2"), made, "r2"),
    }
    ti = MagicMock(run_id="r3", map_index=-1)
    ti.xcom_pull.side_effect = lambda task_ids, key, **_: pulled.get((task_ids, key))
    decided = steps.decide_now(op, op.new_run({"ti": ti}))  # type: ignore[arg-type]
    group = decided["groups"][0]
    assert (group["action"], group["type"], group["next_type"]) == ("changed", big, small), group["reason"]
    assert decided["types"] == {CPU: small} and decided["written_types"] == {CPU: big}
    assert decided["facts"][big] == {"cpus": 8, "gpus": 0} and decided["facts"][small] == {"cpus": 4, "gpus": 0}
    assert decided["prices"][small] == SIZED_PRICES[small]

    pulled[("train", "rightsizing")] = decided  # this run's decision, as pushed: rightsize reuses it
    built = MagicMock()
    built.build.return_value = {
        "ResourceConfig": {"InstanceGroups": [{"InstanceGroupName": CPU, "InstanceType": big, "InstanceCount": 1}]}
    }
    counted = steps.rightsized(op, op.new_run({"ti": ti}), built)  # type: ignore[arg-type]
    sent = counted.build(job_name="j", region="r")["ResourceConfig"]["InstanceGroups"][0]
    assert (sent["InstanceType"], sent["InstanceCount"]) == (small, 1)
    short = short_of(op)  # the task's short form says the type move, not counts alone
    assert (short["counts"], short["types"], short["recommended_types"]) == ({CPU: 1}, {CPU: small}, {CPU: small})
    assert short["actions"] == {CPU: "changed"}
    from airflow_hetero.operators.log_summary import HeteroLogSummaryOperator

    summarize = HeteroLogSummaryOperator(task_id="summarize", training_task_id="train")
    shown = summarize.record_rightsizing(idle("job-3", small, cpu_scale=2), {"ti": ti})  # type: ignore[arg-type]
    assert shown["rightsizing"]["next"] == {CPU: 1} and shown["rightsizing"]["next_types"] == {CPU: small}
    assert shown["rightsizing"]["recommended_types"] == {CPU: small}

    record_, upcoming = record_next(idle("job-3", small, cpu_scale=2), decided, "r3")  # 50 % of half the vCPUs
    assert record_["groups"][CPU]["type"] == small and record_["fallback"] is False
    assert upcoming["types"] == {CPU: small} and upcoming["groups"][0]["type"] == small
    assert upcoming["groups"][0]["reason"] == "1 of 2 runs at this cluster so far"  # the runs on big are another
    assert "the next run uses instance_group_1=1 x ml.c5.xlarge" in next_run_lines(upcoming)[0]
