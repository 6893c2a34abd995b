"""Right-sizing decisions from recorded run summaries (airflow_hetero.job.rightsizing): convergence, balance,
shrinking, noise, the resets, the undo, the bounds, the budget and the objective; and the policy's checks."""

from __future__ import annotations

from typing import Any

import pytest
from support.rightsizing_runs import DATA, PRICES, TRAIN, record

from airflow_hetero.definition.rightsizing import (
    CountedJob,
    GroupFacts,
    RightSizing,
    RightSizingError,
    check_policy,
    definition_fingerprint,
    groups_of_source,
)
from airflow_hetero.job.rightsizing import Decision, decide, record_of_summary, signal_of


def policy(mode: str = "apply", **kwargs: Any) -> RightSizing:
    bounds = kwargs.pop("bounds", {"min_count": 1, "max_count": 8})
    return RightSizing.of({"groups": {DATA: bounds}, "mode": mode, **kwargs})


def run_sequence(
    rs: RightSizing, start: int, runs: int, seen: list[dict[str, Any]] | None = None, **summary: Any
) -> tuple[list[int], list[Decision]]:
    """Decide, run at the decided count, record; ``runs`` times. The counts each run used and the decisions
    (``seen``, when given, gets every run's record)."""
    counts, records, used, decisions = {DATA: start}, [], [], []
    blocked: dict[str, list[int]] = {}
    for i in range(runs):
        decision = decide(rs, counts, records, fingerprint="fp", prices=PRICES, blocked=blocked)
        decisions.append(decision)
        counts, blocked = decision.counts, decision.blocked
        used.append(counts[DATA])
        records.append(record(counts[DATA], run_id=f"r{i}", **summary))
        if seen is not None:
            seen.append(records[-1])
        records = records[-rs.history :]
    return used, decisions


def test_a_starved_data_group_grows_step_by_step_to_balance_and_stops() -> None:
    seen: list[dict[str, Any]] = []
    used, decisions = run_sequence(policy(), 1, 9, seen, ratio=5)
    assert used == [1, 1, 2, 2, 4, 4, 4, 4, 4]
    changed = [d.groups[0] for d in decisions if d.groups[0].action == "changed"]
    assert [(g.count, g.next_count) for g in changed] == [(1, 2), (2, 4)]  # x2 at most: the verdict asked 1 -> 4
    assert changed[0].signals == ["grow:4", "grow:4"] and changed[0].figures["run_seconds_after"] == 4.0
    assert {d.groups[0].action for d in decisions} == {"kept", "changed"}  # only growth, never undone
    # the two runs before each growth: the data group starved the trainer (the bottleneck), and the verdict then
    # calls the cluster balanced at the final count
    assert all(r["verdict"]["bottleneck"] == DATA for r in seen[:4])
    assert {r["verdict"]["kind"] for r in seen[4:]} == {"balanced"}
    assert seen[-1]["run_seconds"] < seen[0]["run_seconds"]  # the grown cluster's run is shorter
    last = decisions[-1].groups[0]
    assert (last.action, last.reason) == ("kept", "the verdict holds it")


def test_an_over_provisioned_data_group_shrinks_and_stays() -> None:
    seen: list[dict[str, Any]] = []
    used, decisions = run_sequence(policy(), 4, 6, seen, ratio=1)
    assert used == [4, 4, 2, 2, 2, 2]
    assert all(r["groups"][DATA].get("over_provisioned") for r in seen[:2])  # the runs with 4 data hosts
    change = decisions[2].groups[0]
    assert change.action == "changed" and change.signals == ["shrink:2", "shrink:2"]
    assert change.figures["cost_per_run_after"] < change.figures["cost_per_run"]
    assert [d.groups[0].action for d in decisions] == ["kept", "kept", "changed", "kept", "kept", "kept"]


def test_recommend_mode_changes_nothing_and_says_what_it_would_do() -> None:
    used, decisions = run_sequence(policy("recommend"), 1, 4, ratio=5)
    assert used == [1, 1, 1, 1]
    assert [d.recommended[DATA] for d in decisions] == [1, 1, 2, 2]
    assert decisions[-1].groups[0].action == "changed" and decisions[-1].counts == {DATA: 1}


def test_noisy_utilisation_around_a_threshold_does_not_oscillate() -> None:
    """The training group flips between waiting (45%) and busy (55%) run after run: no two runs agree."""
    rs = policy()
    records = [record(2, ratio=4, noise=-5 if i % 2 else 5, run_id=f"r{i}") for i in range(8)]
    assert [signal_of(r, DATA)[0] for r in records] == ["hold", "grow"] * 4
    for end in range(1, 9):
        decision = decide(rs, {DATA: 2}, records[:end], fingerprint="fp", prices=PRICES)
        assert decision.counts == {DATA: 2}, decision.lines()
        assert decision.groups[0].action == "kept", decision.lines()  # never changed, never undone
    assert decision.groups[0].reason == "the latest runs disagree"
    # the noise is in the figures: the trainer busier on the runs with +5 points than on those with -5
    trainer = [r["groups"][TRAIN]["busy_percent"] for r in records]
    assert min(trainer[0::2]) > max(trainer[1::2])


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"status": "Failed"}, "ended failed"),
        ({"status": "Stopped"}, "ended stopped"),
        ({"fingerprint": "other"}, "came from another definition"),
        ({"counts": {DATA: 3}}, "ran on a fallback cluster"),  # asked for 3, ran 2
    ],
)
def test_a_failed_stopped_fallback_or_changed_run_resets_the_evidence(bad: dict[str, Any], reason: str) -> None:
    grow = [record(2, ratio=5, run_id="a"), record(2, ratio=5, run_id="b")]
    assert decide(policy(), {DATA: 2}, grow, fingerprint="fp", prices=PRICES).counts == {DATA: 4}
    records = [grow[0], record(2, ratio=5, run_id="bad", **bad), grow[1]]
    decision = decide(policy(), {DATA: 2}, records, fingerprint="fp", prices=PRICES)
    assert decision.counts == {DATA: 2} and decision.evidence == 1
    assert decision.reset is not None and reason in decision.reset and "bad" in decision.reset
    assert decision.groups[0].reason == "1 of 2 runs at this cluster so far"


def test_a_capacity_fallback_in_the_summary_resets_too() -> None:
    fell_back = record_of_summary({"status": "Completed", "capacity_attempts": [{"job_name": "x"}]}, {}, "f")
    decision = decide(policy(), {DATA: 2}, [record(2, ratio=5), fell_back], fingerprint="fp")
    assert decision.evidence == 0 and "fallback" in str(decision.reset)


def test_a_change_that_made_the_run_dearer_and_not_faster_is_undone_and_not_tried_again() -> None:
    """1 -> 2 data hosts, but the second run took as long (the data came from a slower store): undone."""
    rs = policy()
    records = [record(1, ratio=5, run_id="a"), record(1, ratio=5, run_id="b")]
    first = decide(rs, {DATA: 1}, records, fingerprint="fp", prices=PRICES)
    assert first.counts == {DATA: 2}
    records.append(record(2, ratio=5, slowdown=2.0, run_id="c"))  # 8 s again, with 2 data hosts
    undo = decide(rs, first.counts, records, fingerprint="fp", prices=PRICES)
    group = undo.groups[0]
    assert (group.action, group.count, group.next_count) == ("undone", 2, 1)
    assert "cost more without getting faster" in group.reason and undo.blocked == {DATA: [2]}
    assert group.figures["cost"] > group.figures["cost_before"]
    blocked = undo.blocked
    for run in ("d", "e"):
        records.append(record(1, ratio=5, run_id=run))
        again = decide(rs, {DATA: 1}, records, fingerprint="fp", prices=PRICES, blocked=blocked)
        assert again.counts == {DATA: 1}
    assert again.groups[0].reason == "would grow to 2, which was tried and undone"


def _undone_growth() -> tuple[RightSizing, list[dict[str, Any]], dict[str, list[int | str]]]:
    """1 -> 2 data hosts undone (the run with 2 cost more without getting faster): the records and the blocked."""
    records = [record(1, ratio=5, run_id="a"), record(1, ratio=5, run_id="b")]
    records.append(record(2, ratio=5, slowdown=2.0, run_id="c"))
    undo = decide(policy(), {DATA: 2}, records, fingerprint="fp", prices=PRICES)
    assert undo.groups[0].action == "undone" and undo.blocked == {DATA: [2]}
    return policy(), records, undo.blocked


def test_an_undo_is_never_undone_back_to_the_blocked_count() -> None:
    rs, records, blocked = _undone_growth()
    records.append(record(1, ratio=5, slowdown=3.0, run_id="d"))  # back on 1, slower than on 2 (noise)
    decision = decide(rs, {DATA: 1}, records, fingerprint="fp", prices=PRICES, blocked=blocked)
    group = decision.groups[0]
    assert group.action != "undone" and decision.counts == {DATA: 1}, group.reason
    assert decision.blocked == {DATA: [2]}


@pytest.mark.parametrize("status", ["Failed", "Stopped"])
def test_a_reset_keeps_the_counts_undone_only_a_new_definition_forgets_them(status: str) -> None:
    rs, records, blocked = _undone_growth()
    records.append(record(1, ratio=5, status=status, run_id="failed"))
    for run in ("d", "e"):
        records.append(record(1, ratio=5, run_id=run))
        again = decide(rs, {DATA: 1}, records, fingerprint="fp", prices=PRICES, blocked=blocked)
        assert again.counts == {DATA: 1} and again.blocked == {DATA: [2]}
        blocked = again.blocked
    assert again.groups[0].reason == "would grow to 2, which was tried and undone"
    fell = [*records[:-2], record(1, ratio=5, counts={DATA: 2}, run_id="fell"), *records[-2:]]
    assert decide(rs, {DATA: 1}, fell, fingerprint="fp", prices=PRICES, blocked=blocked).blocked == {DATA: [2]}
    other = [record(1, ratio=5, fingerprint="new", run_id=r) for r in ("f", "g")]
    fresh = decide(rs, {DATA: 1}, [*records, *other], fingerprint="new", prices=PRICES, blocked=blocked)
    assert fresh.blocked == {} and fresh.counts == {DATA: 2}


def test_a_slower_run_after_a_shrink_is_undone() -> None:
    records = [record(4, ratio=1, run_id="a"), record(2, ratio=1, slowdown=1.5, run_id="b")]
    decision = decide(policy(), {DATA: 2}, records, fingerprint="fp", prices=PRICES)
    assert decision.groups[0].action == "undone" and decision.counts == {DATA: 4}
    assert "slower" in decision.groups[0].reason


def test_bounds_stop_a_step_and_refuse_at_the_edge() -> None:
    used, decisions = run_sequence(policy(bounds={"min_count": 1, "max_count": 3}), 1, 7, ratio=8)
    assert used == [1, 1, 2, 2, 3, 3, 3]
    clipped = decisions[4].groups[0]
    assert clipped.action == "changed" and "bound: 4 wanted" in clipped.reason
    edge = decisions[-1].groups[0]
    assert edge.action == "refused_bound" and edge.reason == "would grow to 6; max_count is 3"
    shrink = decide(
        policy(bounds={"min_count": 4, "max_count": 8}), {DATA: 4}, [record(4, ratio=1)] * 2, fingerprint="fp"
    )
    assert shrink.groups[0].action == "refused_bound" and "min_count is 4" in shrink.groups[0].reason


def test_the_budget_refuses_a_cluster_whose_run_could_cost_more_than_max_cost() -> None:
    records = [record(1, ratio=5, run_id="a"), record(1, ratio=5, run_id="b")]
    # 8 s at 1 x 0.204 + 1 x 1.408 USD/h costs 0.00358; 2 data hosts could cost 0.00404 if no faster
    refused = decide(policy(), {DATA: 1}, records, fingerprint="fp", prices=PRICES, max_cost=0.004)
    group = refused.groups[0]
    assert (group.action, refused.counts) == ("refused_budget", {DATA: 1})
    assert group.figures["worst_case"] == pytest.approx(0.004036, abs=1e-6) and group.figures["max_cost"] == 0.004
    assert decide(policy(), {DATA: 1}, records, fingerprint="fp", prices=PRICES, max_cost=0.005).counts == {DATA: 2}
    unpriced = decide(policy(), {DATA: 1}, records, fingerprint="fp", prices={}, max_cost=1.0)
    assert unpriced.groups[0].action == "refused_budget" and "no price" in unpriced.groups[0].reason


def test_objective_cost_keeps_a_growth_that_does_not_pay_for_itself_and_time_takes_it() -> None:
    dear = {"ml.c5.xlarge": 20.0, "ml.g5.xlarge": 1.408}  # data hosts dearer than the GPU they feed
    # the training group waits at 40%: 2 data hosts make it 75% busy, 1.875 x faster, for 1.93 x the price
    records = [record(1, ratio=2.5, prices=dear, run_id="a"), record(1, ratio=2.5, prices=dear, run_id="b")]
    cost = decide(policy(objective="cost", tolerance=0), {DATA: 1}, records, fingerprint="fp", prices=dear)
    assert cost.counts == {DATA: 1} and "objective cost" in cost.groups[0].reason
    time = decide(policy(objective="time", tolerance=0), {DATA: 1}, records, fingerprint="fp", prices=dear)
    assert time.counts == {DATA: 2}


def test_one_change_per_run_and_a_caller_reset() -> None:
    rs = RightSizing.of({"groups": {DATA: {"max_count": 8}, TRAIN: {"max_count": 4}}, "mode": "apply", "agree_runs": 1})
    both = [record(4, ratio=1, counts={DATA: 4, TRAIN: 1})]  # data over-provisioned, train the bottleneck
    decision = decide(rs, {DATA: 4, TRAIN: 1}, both, fingerprint="fp", prices=PRICES)
    assert decision.counts == {DATA: 2, TRAIN: 1}
    assert "one change per run (data_group changes first)" in decision.groups[1].reason
    grown = decide(rs, {DATA: 1, TRAIN: 1}, [record(1, ratio=5)], fingerprint="fp", prices=PRICES)
    assert grown.groups[0].reason == "the last run says grow"  # agree_runs=1: one run, said as one
    gap = decide(rs, {DATA: 4, TRAIN: 1}, [], fingerprint="fp", reset="run x left no record")
    assert gap.reset == "run x left no record" and gap.evidence == 0


def test_decisions_are_plain_json_and_one_line_each() -> None:
    import json

    _, decisions = run_sequence(policy(), 1, 3, ratio=5)
    data = json.loads(json.dumps(decisions[-1].as_dict()))
    assert data["groups"][0]["action"] == "changed" and data["counts"] == {DATA: 2}
    lines = decisions[-1].lines()
    assert lines[0] == "Right-sizing (apply, objective cost): 2 run(s) of evidence"
    assert lines[1].startswith("  data_group: changed (1 -> 2): the last 2 runs say grow [cost_per_run=")


# -- the policy ---------------------------------------------------------------------------------------------

GROUPS = {
    DATA: GroupFacts("ml.c5.xlarge", 2, ("ml.c5.2xlarge",)),
    TRAIN: GroupFacts("ml.g5.xlarge", 1),
}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"groups": {DATA: {"min_count": 3, "max_count": 2}}},
            "rightsizing.groups.data_group: min_count 3 is above max_count 2",
        ),
        ({"groups": {DATA: {"max_count": 0}}}, "rightsizing.groups.data_group.max_count: Input should be greater"),
        ({"groups": {}}, "rightsizing.groups: "),
        ({"groups": {DATA: {"max_count": 2}}, "mode": "auto"}, "rightsizing.mode: "),
        ({"groups": {DATA: {"max_count": 2}}, "objective": "speed"}, "rightsizing.objective: "),
        ({"groups": {DATA: {"max_count": 2}}, "tolerance": 1.5}, "rightsizing.tolerance: "),
        ({"groups": {DATA: {"max_count": 2}}, "agree_runs": 3, "history": 2}, "history 2 keeps fewer runs"),
        ({"groups": {DATA: {"max_count": 2}}, "speed": 1}, "rightsizing.speed: Extra inputs"),
        ({"groups": {DATA: {"max_count": 2, "types": []}}}, "types, when given"),
        ({"groups": {DATA: {"max_count": True}}}, "rightsizing.groups.data_group.max_count: a number, not True"),
        ({"groups": {DATA: {"max_count": 2}}, "agree_runs": False}, "rightsizing.agree_runs: a number, not False"),
        ({"groups": {DATA: {"max_count": "2.5"}}}, "rightsizing.groups.data_group.max_count: Input should be a valid"),
    ],
)
def test_a_bad_policy_names_its_field(value: dict[str, Any], message: str) -> None:
    with pytest.raises(RightSizingError, match=message.replace(".", r"\.").replace("(", r"\(")):
        RightSizing.of(value)


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"model_group": {"max_count": 2}}, "rightsizing.groups.model_group: the job has no such instance group"),
        ({DATA: {"min_count": 3, "max_count": 8}}, "rightsizing.groups.data_group: the job runs 2 instances, outside"),
        ({DATA: {"max_count": 1}}, "outside min_count 1 to max_count 1"),
        ({DATA: {"max_count": 4, "types": ["ml.c5.2xlarge", "ml.m5.xlarge"]}}, "types.1: ml.m5.xlarge is neither"),
    ],
)
def test_a_policy_that_does_not_fit_the_job_names_its_field(groups: dict[str, Any], message: str) -> None:
    with pytest.raises(RightSizingError, match=message.replace(".", r"\.")):
        check_policy(RightSizing.of({"groups": groups}), GROUPS)


def test_a_rendered_policy_has_strings_for_numbers() -> None:
    rendered = RightSizing.of(
        {"groups": {DATA: {"min_count": "2", "max_count": "8"}}, "agree_runs": "3", "tolerance": "0.1"}
    )
    assert (rendered.groups[DATA].min_count, rendered.groups[DATA].max_count) == (2, 8)
    assert (rendered.agree_runs, rendered.tolerance) == (3, 0.1)


def test_a_policy_needs_instance_groups_and_reads_both_forms() -> None:
    with pytest.raises(RightSizingError, match="this job has no instance_groups"):
        check_policy(RightSizing.of({"groups": {DATA: {"max_count": 2}}}), {})
    definition = {
        "instance_groups": [{"instance_group_name": DATA, "instance_type": "ml.c5.xlarge", "instance_count": 2}]
    }
    assert groups_of_source(definition, request=False, fallbacks={DATA: ["ml.c5.2xlarge"]}) == {
        DATA: GroupFacts("ml.c5.xlarge", 2, ("ml.c5.2xlarge",))
    }
    request = {
        "ResourceConfig": {
            "InstanceGroups": [{"InstanceGroupName": DATA, "InstanceType": "ml.c5.xlarge", "InstanceCount": 3}]
        }
    }
    assert groups_of_source(request, request=True) == {DATA: GroupFacts("ml.c5.xlarge", 3)}
    model = RightSizing(groups={DATA: {"max_count": 4}})  # type: ignore[dict-item]
    assert RightSizing.of(model) is model and model.as_dict()["groups"] == {DATA: {"min_count": 1, "max_count": 4}}


def test_the_fingerprint_ignores_the_managed_counts_and_templates_data() -> None:
    def job(count: int, other: int = 1, entry: str = "train.py") -> dict[str, Any]:
        return {
            "entry_point": entry,
            "inputs": {"raw": {"s3_data": "s3://b/{{ ds }}/"}},
            "instance_groups": [
                {"instance_group_name": DATA, "instance_type": "ml.c5.xlarge", "instance_count": count},
                {"instance_group_name": TRAIN, "instance_type": "ml.g5.xlarge", "instance_count": other},
            ],
        }

    same = definition_fingerprint(job(2), [DATA], request=False)
    assert definition_fingerprint(job(5), [DATA], request=False) == same
    assert definition_fingerprint(job(2, other=2), [DATA], request=False) != same  # not a managed group
    assert definition_fingerprint(job(2, entry="other.py"), [DATA], request=False) != same


def test_a_counted_job_builds_its_requests_with_the_decided_counts() -> None:
    class Job:
        base_job_name, name_note, fallbacks = "b", None, {}

        def build(self, **_: Any) -> dict[str, Any]:
            groups = [{"InstanceGroupName": DATA, "InstanceCount": 1}, {"InstanceGroupName": TRAIN, "InstanceCount": 1}]
            return {"ResourceConfig": {"InstanceGroups": groups}}

    counted = CountedJob(Job(), {DATA: 3})  # type: ignore[arg-type]
    built = counted.build(job_name="j", region="r")
    assert built["ResourceConfig"]["InstanceGroups"] == [
        {"InstanceGroupName": DATA, "InstanceCount": 3},
        {"InstanceGroupName": TRAIN, "InstanceCount": 1},
    ]
    assert counted.base_job_name == "b"
