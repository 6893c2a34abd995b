"""Right-sizing moves between a group's ``GroupBounds.types`` (airflow_hetero.job.rightsizing_types, through
decide): objective cost, a smaller type for an under-used group at min_count; objective time, a larger type for
a bottleneck at max_count; one step, after agreeing runs, undone when the next run got slower, reset by a run on
another type than asked, never with a count change in the same decision; and each refusal. The vCPUs and GPUs
are SageMaker's facts (airflow_hetero.sagemaker_facts, through instance_facts)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.rightsizing_runs import DATA, SIZED_PRICES, TRAIN, record

from airflow_hetero.definition.rightsizing import CountedJob, RightSizing
from airflow_hetero.job.rightsizing import Decision, decide, decide_again, next_run_lines
from airflow_hetero.job.rightsizing_types import carried_types, instance_facts, next_type

C5 = {"large": "ml.c5.large", "xl": "ml.c5.xlarge", "2xl": "ml.c5.2xlarge", "4xl": "ml.c5.4xlarge"}
FACTS = instance_facts([*C5.values(), "ml.g5.xlarge", "ml.g5.2xlarge"])


def policy(objective: str = "cost", mode: str = "apply", **bounds: Any) -> RightSizing:
    limits = {"min_count": 1, "max_count": 8, "types": [C5["xl"], C5["2xl"], C5["large"]], **bounds}
    return RightSizing.of({"groups": {DATA: limits}, "objective": objective, "mode": mode})


def idle_runs(kind: str, runs: int = 2, **kwargs: Any) -> list[dict[str, Any]]:
    """Runs with 1 data host of ``kind`` waiting on the trainer (25 % busy: below over_provisioned 30 %)."""
    return [record(1, ratio=0.25, data_type=kind, run_id=f"r{i}", **kwargs) for i in range(runs)]


def decided(rs: RightSizing, records: list[dict[str, Any]], kind: str, count: int = 1, **kwargs: Any) -> Decision:
    options: dict[str, Any] = {"fingerprint": "fp", "prices": SIZED_PRICES, "facts": FACTS, **kwargs}
    return decide(rs, {DATA: count}, records, types={DATA: kind}, **options)


def test_the_facts_are_the_capacity_tables() -> None:
    assert FACTS[C5["2xl"]] == {"cpus": 8, "gpus": 0} and FACTS["ml.g5.2xlarge"] == {"cpus": 8, "gpus": 1}


def test_cost_moves_an_under_used_group_at_min_count_to_the_next_smaller_type_after_agreeing_runs() -> None:
    runs = idle_runs(C5["2xl"])
    assert decided(policy(), runs[:1], C5["2xl"]).types == {DATA: C5["2xl"]}  # 1 of 2 runs so far
    decision = decided(policy(), runs, C5["2xl"])
    group = decision.groups[0]
    assert (group.action, group.count, group.next_count) == ("changed", 1, 1)
    assert (group.type, group.next_type) == (C5["2xl"], C5["xl"])  # the nearest size down, not ml.c5.large
    assert decision.types == decision.recommended_types == {DATA: C5["xl"]} and decision.counts == {DATA: 1}
    assert group.reason == (
        "the last 2 runs found it under-used; min_count is 1: a smaller type "
        "(ml.c5.2xlarge -> ml.c5.xlarge: 25% of 8 vCPUs is 50% of 4)"
    )
    assert group.figures == {
        "vcpus": 8,
        "vcpus_after": 4,
        "busy_percent": 25.0,
        "busy_percent_after": 50.0,
        "target_percent": 75.0,
        "price_per_hour": 0.408,
        "price_per_hour_after": 0.204,
        "cost_per_run": pytest.approx(0.016142, abs=1e-6),
        "cost_per_run_after": pytest.approx(0.014329, abs=1e-6),
    }
    assert group.line().startswith("data_group: changed (1 x ml.c5.2xlarge -> 1 x ml.c5.xlarge): the last 2 runs")
    assert "[vcpus=8, vcpus_after=4, busy_percent=25, busy_percent_after=50," in group.line()
    data = json.loads(json.dumps(decision.as_dict()))
    assert data["groups"][0]["next_type"] == C5["xl"] and data["types"] == {DATA: C5["xl"]}


def test_recommend_says_the_type_and_keeps_the_one_written() -> None:
    decision = decided(policy(mode="recommend"), idle_runs(C5["2xl"]), C5["2xl"])
    assert decision.types == {DATA: C5["2xl"]} and decision.recommended_types == {DATA: C5["xl"]}
    state = {**decision.as_dict(), "written_types": {DATA: C5["2xl"]}}
    head = next_run_lines(state)[0]
    assert head.endswith(
        "the next run uses data_group=1; recommended: data_group=1 x ml.c5.xlarge (2 run(s) of evidence)"
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"types": [C5["2xl"], C5["large"]]}, "no smaller type: on ml.c5.large its load would be 100% > target 75%"),
        ({"types": [C5["2xl"], C5["4xl"]]}, "no smaller type: no cheaper type in types with fewer vCPUs and the same"),
        ({"types": [C5["2xl"], "ml.g5.xlarge"]}, "no cheaper type in types with fewer vCPUs and the same GPUs"),
    ],
)
def test_a_smaller_type_that_would_not_hold_the_load_or_is_not_smaller_is_refused(
    change: dict[str, Any], reason: str
) -> None:
    decision = decided(policy(**change), idle_runs(C5["2xl"]), C5["2xl"])
    group = decision.groups[0]
    assert group.action == "kept" and group.next_type == C5["2xl"] and reason in group.reason, group.reason
    assert group.reason.startswith("the verdict holds it; ")


@pytest.mark.parametrize("order", [(1.16, 0.72), (0.72, 1.16)])
def test_a_smaller_type_is_sized_by_the_highest_load_of_the_agreeing_runs_in_either_order(
    order: tuple[float, float],
) -> None:
    """29 % and 18 % of 16 vCPUs, both under-used: 29 % would be 116 % of 4 vCPUs, so no move, either order."""
    runs = [record(1, ratio=0.25, data_type=C5["4xl"], cpu_scale=k, run_id=f"o{i}") for i, k in enumerate(order)]
    group = decided(policy(types=[C5["4xl"], C5["xl"]]), runs, C5["4xl"]).groups[0]
    assert group.next_type == C5["4xl"] and "on ml.c5.xlarge its load would be 116% > target 75%" in group.reason
    assert group.figures["busy_percent"] == 29.0


def test_types_listing_only_a_fallback_type_still_moves_the_group_there() -> None:
    decision = decided(policy(types=[C5["xl"]]), idle_runs(C5["2xl"]), C5["2xl"])
    group = decision.groups[0]
    assert (group.action, group.next_type) == ("changed", C5["xl"]), group.reason
    assert decided(policy(types=[C5["2xl"]]), idle_runs(C5["2xl"]), C5["2xl"]).types == {DATA: C5["2xl"]}


def test_no_type_move_off_the_bound_under_the_other_objective_or_without_agreement() -> None:
    runs = idle_runs(C5["2xl"])
    assert decided(policy(objective="time"), runs, C5["2xl"]).groups[0].reason == "the verdict holds it"
    above = decided(policy(min_count=1), [record(2, ratio=0.25, data_type=C5["2xl"]) for _ in range(2)], C5["2xl"], 2)
    assert (above.groups[0].next_count, above.groups[0].next_type) == (1, C5["2xl"])  # a count step first
    busy = [record(1, ratio=0.25, data_type=C5["2xl"], cpu_scale=1.6, run_id=f"b{i}") for i in range(2)]  # 40 %
    assert decided(policy(), [runs[0], busy[1]], C5["2xl"]).types == {DATA: C5["2xl"]}  # one run at 40 %
    assert decided(policy(), busy, C5["2xl"]).groups[0].reason == "the verdict holds it"
    pinned = RightSizing.of({"groups": {DATA: {"max_count": 8}}, "mode": "apply"})  # no types: counts only
    assert decided(pinned, runs, C5["2xl"]).types == {DATA: C5["2xl"]}
    assert decide(policy(), {DATA: 1}, runs, fingerprint="fp", prices=SIZED_PRICES).groups[0].type is None


def test_unknown_facts_unpriced_or_blocked_types_are_not_chosen() -> None:
    runs = idle_runs(C5["2xl"])
    unpriced = {k: v for k, v in SIZED_PRICES.items() if k != C5["xl"]}
    group = decided(policy(), runs, C5["2xl"], prices=unpriced).groups[0]
    assert group.next_type == C5["2xl"] and "ml.c5.xlarge without figures or price" in group.reason
    blocked = decided(policy(types=[C5["2xl"], C5["xl"]]), runs, C5["2xl"], blocked={DATA: [C5["xl"]]}).groups[0]
    assert blocked.next_type == C5["2xl"] and "ml.c5.xlarge tried and undone" in blocked.reason
    nothing = next_type("smaller", "ml.x9.huge", [C5["xl"]], facts=FACTS, prices=SIZED_PRICES, blocked=[], busy=5,
                        resource="cpu", target=75)  # fmt: skip
    assert nothing.to is None and "no vCPU/GPU figures or no price" in nothing.why


def test_a_type_known_only_through_the_summarys_capacity_overrides_is_sized_by_them() -> None:
    """ml.c5.9xlarge-custom is in no table: the summary's capacity_overrides gave it 8 vCPUs (its devices)."""
    from support.rightsizing_runs import summary

    from airflow_hetero.job.rightsizing import record_of_summary

    custom, prices = "ml.c5.custom", {**SIZED_PRICES, "ml.c5.custom": 0.408}
    runs = []
    for i in range(2):
        run = summary(1, ratio=0.25, data_type=custom, prices=prices, name=f"o{i}")
        run["groups"][DATA]["devices"] = {"cpus": 8, "gpus": 0}
        runs.append(
            record_of_summary(run, {"fingerprint": "fp", "counts": {DATA: 1}, "types": {DATA: custom}}, f"o{i}")
        )
    facts = instance_facts([custom, C5["xl"]])
    assert facts[custom]["cpus"] is None  # the package's table does not know its vCPUs
    group = decided(policy(types=[custom, C5["xl"]]), runs, custom, prices=prices, facts=facts).groups[0]
    assert (group.action, group.next_type) == ("changed", C5["xl"]), group.reason
    assert group.figures["vcpus"] == 8 and group.figures["busy_percent_after"] == 50.0
    assert runs[0]["groups"][DATA]["devices"] == {"cpus": 8, "gpus": 0}


def test_time_moves_a_bottleneck_at_max_count_to_the_next_larger_type_within_the_budget() -> None:
    runs = [record(2, ratio=5, run_id=f"s{i}") for i in range(2)]  # 2 data hosts of ml.c5.xlarge, starving
    rs = policy(objective="time", max_count=2, types=[C5["xl"], C5["4xl"], C5["2xl"]])
    decision = decided(rs, runs, C5["xl"], 2)
    group = decision.groups[0]
    assert (group.action, group.next_count, group.next_type) == ("changed", 2, C5["2xl"]), group.reason
    assert "max_count is 2: a larger type (ml.c5.xlarge -> ml.c5.2xlarge: 4 -> 8 vCPUs)" in group.reason
    assert group.figures["vcpus"] == 4 and group.figures["vcpus_after"] == 8
    refused = decided(rs, runs, C5["xl"], 2, max_cost=group.figures["cost_per_run_after"] * 0.9).groups[0]
    assert refused.action == "refused_budget" and refused.next_type == C5["xl"]
    assert (
        refused.reason.startswith("ml.c5.2xlarge could cost")
        and refused.figures["worst_case"] > refused.figures["max_cost"]
    )
    cost = decided(policy(max_count=2, types=[C5["xl"], C5["2xl"]]), runs, C5["xl"], 2).groups[0]
    assert cost.action == "refused_bound" and cost.next_type == C5["xl"]  # objective cost buys no larger type
    top = decided(policy(objective="time", max_count=2, types=[C5["xl"], C5["large"]]), runs, C5["xl"], 2).groups[0]
    assert top.action == "refused_bound" and "no larger type: no type in types with more vCPUs" in top.reason


def test_time_moves_a_type_when_another_group_has_no_price_unless_max_cost_needs_it() -> None:
    runs = [record(2, ratio=5, run_id=f"s{i}") for i in range(2)]
    rs = policy(objective="time", max_count=2, types=[C5["xl"], C5["2xl"]])
    no_trainer = {k: v for k, v in SIZED_PRICES.items() if k != "ml.g5.xlarge"}
    group = decided(rs, runs, C5["xl"], 2, prices=no_trainer).groups[0]
    assert (group.action, group.next_type) == ("changed", C5["2xl"]), group.reason
    budget = decided(rs, runs, C5["xl"], 2, prices=no_trainer, max_cost=100.0).groups[0]
    assert (budget.action, budget.next_type) == ("refused_budget", C5["xl"])
    assert "would move to ml.c5.2xlarge, but no price or run length to weigh it by" in budget.reason


def test_a_type_move_whose_next_run_got_slower_is_undone_and_not_tried_again() -> None:
    rs = policy(types=[C5["2xl"], C5["xl"]])
    runs = idle_runs(C5["2xl"])
    moved = decided(rs, runs, C5["2xl"])
    assert moved.types == {DATA: C5["xl"]}
    runs.append(record(1, ratio=0.25, data_type=C5["xl"], slowdown=1.5, cpu_scale=2, run_id="slow"))
    undo = decided(rs, runs, C5["xl"])
    group = undo.groups[0]
    assert (group.action, group.type, group.next_type, group.next_count) == ("undone", C5["xl"], C5["2xl"], 1)
    assert group.reason == "the run got slower after ml.c5.2xlarge -> ml.c5.xlarge: back to ml.c5.2xlarge"
    assert undo.blocked == {DATA: [C5["xl"]]} and undo.types == {DATA: C5["2xl"]}
    runs += idle_runs(C5["2xl"])
    again = decided(rs, runs, C5["2xl"], blocked=undo.blocked).groups[0]
    assert again.next_type == C5["2xl"] and "ml.c5.xlarge tried and undone" in again.reason


def test_an_undone_type_move_is_not_undone_back_to_the_blocked_type() -> None:
    rs = policy(types=[C5["2xl"], C5["xl"]])
    runs = [*idle_runs(C5["2xl"]), record(1, ratio=0.25, data_type=C5["xl"], slowdown=1.5, cpu_scale=2, run_id="x")]
    undo = decided(rs, runs, C5["xl"])
    assert undo.groups[0].action == "undone" and undo.blocked == {DATA: [C5["xl"]]}
    runs.append(record(1, ratio=0.25, data_type=C5["2xl"], slowdown=1.8, run_id="back"))  # slower than on xl
    again = decided(rs, runs, C5["2xl"], blocked=undo.blocked)
    group = again.groups[0]
    assert group.action != "undone" and again.types == {DATA: C5["2xl"]}, group.reason
    assert again.blocked == {DATA: [C5["xl"]]}


@pytest.mark.parametrize(
    "bounds",
    [
        {"types": [C5["2xl"], C5["large"]]},  # the type moved to is taken out of types
        {},  # types dropped
        {"min_count": 1, "max_count": 1},  # pinned: min_count == max_count and no types
        {"types": [C5["2xl"]]},  # pinned: types is the group's own type only
    ],
)
def test_a_type_moved_to_that_the_policy_no_longer_lists_goes_back_to_the_written_type(
    bounds: dict[str, Any],
) -> None:
    moved = decided(policy(), idle_runs(C5["2xl"]), C5["2xl"])
    state = {**moved.as_dict(), "facts": FACTS, "prices": SIZED_PRICES, "written_types": {DATA: C5["2xl"]}}
    state["history"] = idle_runs(C5["xl"], cpu_scale=2)
    rs = RightSizing.of({"groups": {DATA: {"min_count": 1, "max_count": 8, **bounds}}, "mode": "apply"})
    again = decide_again(state, rs, {DATA: 1})
    assert again.types == {DATA: C5["2xl"]}, again.groups[0].reason
    assert again.groups[0].reason.startswith("ml.c5.xlarge is not in its types: back to ml.c5.2xlarge as written; ")
    kept = decide_again(state, policy(), {DATA: 1})  # still listed: it stays
    assert kept.types == {DATA: C5["xl"]} and "not in its types" not in kept.groups[0].reason


def test_a_run_on_another_type_than_asked_resets_the_evidence() -> None:
    runs = idle_runs(C5["2xl"])
    runs[1] = record(1, ratio=0.25, data_type=C5["xl"], types={DATA: C5["2xl"]}, run_id="fell")
    decision = decided(policy(), runs, C5["2xl"])
    assert decision.evidence == 0 and decision.reset == "fell ran on a fallback cluster"


def test_one_change_per_run_never_a_type_and_a_count_together() -> None:
    rs = RightSizing.of(
        {
            "groups": {DATA: {"max_count": 8, "types": [C5["2xl"], C5["xl"]]}, TRAIN: {"max_count": 4}},
            "mode": "apply",
            "agree_runs": 1,
        }
    )
    runs = idle_runs(C5["2xl"], 1, counts={DATA: 1, TRAIN: 1})  # the trainer is the bottleneck: it would grow too
    decision = decide(
        rs, {DATA: 1, TRAIN: 1}, runs, fingerprint="fp", prices=SIZED_PRICES, facts=FACTS, types={DATA: C5["2xl"]}
    )
    moved = [g for g in decision.groups if g.moves]
    assert len(moved) == 1 and moved[0].group == DATA and moved[0].next_count == moved[0].count
    assert decision.groups[1].reason == "would go to 2; one change per run (data_group changes first)"
    assert decision.counts == {DATA: 1, TRAIN: 1} and decision.types == {DATA: C5["xl"]}


def test_the_state_decides_again_and_the_counted_job_runs_the_type() -> None:
    decision = decided(policy(), idle_runs(C5["2xl"]), C5["2xl"])
    state = {**decision.as_dict(), "facts": FACTS, "prices": SIZED_PRICES, "written_types": {DATA: C5["2xl"]}}
    state["history"] = idle_runs(C5["xl"], cpu_scale=2)  # two runs on the new type at 50 %: it stays
    again = decide_again(state, policy(), {DATA: 1})
    assert again.types == {DATA: C5["xl"]} and again.groups[0].reason == "the verdict holds it"
    assert carried_types(state | {"fingerprint": "fp"}, "fp", {DATA: C5["2xl"]}, "apply") == {DATA: C5["xl"]}
    assert carried_types(state | {"fingerprint": "fp"}, "other", {DATA: C5["2xl"]}, "apply") == {DATA: C5["2xl"]}
    assert carried_types(state | {"fingerprint": "fp"}, "fp", {DATA: C5["2xl"]}, "recommend") == {DATA: C5["2xl"]}

    class Job:
        base_job_name, name_note, fallbacks = "b", None, {}

        def build(self, **_: Any) -> dict[str, Any]:
            groups = [{"InstanceGroupName": DATA, "InstanceType": C5["2xl"], "InstanceCount": 1}]
            return {"ResourceConfig": {"InstanceGroups": groups}}

    built = CountedJob(Job(), {DATA: 1}, {DATA: C5["xl"]}).build(job_name="j", region="r")  # type: ignore[arg-type]
    assert built["ResourceConfig"]["InstanceGroups"] == [
        {"InstanceGroupName": DATA, "InstanceType": C5["xl"], "InstanceCount": 1}
    ]


# One test per documented rule of a type move (docs/rightsizing.md, "Moving between types"), each failing when
# the rule is taken out of the code.


def test_rule_a_the_bottleneck_is_never_small_enough_for_a_smaller_type() -> None:
    from airflow_hetero.job.rightsizing_types import small_in

    seen = {"groups": {DATA: {"resource": "cpu", "busy_percent": 10.0}}}
    idle = {**seen, "verdict": {"bottleneck": TRAIN, "over_provisioned_percent": 30.0}}
    assert small_in(idle, DATA)
    assert not small_in({**seen, "verdict": {"bottleneck": DATA, "over_provisioned_percent": 30.0}}, DATA)


def test_rule_b_a_smaller_type_must_be_cheaper() -> None:
    dear = {**SIZED_PRICES, C5["xl"]: 0.5}  # fewer vCPUs, but dearer than ml.c5.2xlarge's 0.408
    group = decided(policy(types=[C5["2xl"], C5["xl"]]), idle_runs(C5["2xl"]), C5["2xl"], prices=dear).groups[0]
    assert group.next_type == C5["2xl"] and "no cheaper type in types" in group.reason, group.reason


def test_rule_c_a_larger_type_has_no_less_of_the_other_resource() -> None:
    prices = {**SIZED_PRICES, "ml.g5.2xlarge": 1.515}
    step = next_type("larger", "ml.g5.2xlarge", [C5["4xl"]], facts=FACTS, prices=prices, blocked=[], busy=100,
                     resource="cpu", target=75)  # fmt: skip
    assert step.to is None and "no type in types with more vCPUs" in step.why  # 16 vCPUs, but no GPU


def test_rule_d_no_undo_when_another_group_changed_its_type_in_the_same_run() -> None:
    rs = RightSizing.of(
        {
            "groups": {DATA: {"max_count": 8}, TRAIN: {"max_count": 4, "types": ["ml.g5.xlarge", "ml.g5.2xlarge"]}},
            "mode": "apply",
        }
    )
    runs = [record(1, ratio=5, run_id="a"), record(2, ratio=5, slowdown=2.0, run_id="b")]  # dearer, not faster
    runs[1]["groups"][TRAIN]["type"] = "ml.g5.2xlarge"  # the trainer's type changed in the same run
    prices = {**SIZED_PRICES, "ml.g5.2xlarge": 1.515}
    decision = decide(rs, {DATA: 2, TRAIN: 1}, runs, fingerprint="fp", prices=prices, facts=FACTS,
                      types={DATA: C5["xl"], TRAIN: "ml.g5.2xlarge"})  # fmt: skip
    assert [g.action for g in decision.groups] != ["undone", "kept"] and decision.blocked == {}
    runs[1]["groups"][TRAIN]["type"] = "ml.g5.xlarge"  # the same runs with one cause: undone
    alone = decide(rs, {DATA: 2, TRAIN: 1}, runs, fingerprint="fp", prices=prices, facts=FACTS,
                   types={DATA: C5["xl"], TRAIN: "ml.g5.xlarge"})  # fmt: skip
    assert alone.groups[0].action == "undone" and alone.blocked == {DATA: [2]}


def test_rule_e_a_type_move_is_undone_only_when_the_next_run_uses_that_type() -> None:
    rs = policy(types=[C5["2xl"], C5["xl"]])
    runs = [*idle_runs(C5["2xl"]), record(1, ratio=0.25, data_type=C5["xl"], slowdown=1.5, cpu_scale=2, run_id="x")]
    assert decided(rs, runs, C5["xl"]).groups[0].action == "undone"
    gone = decided(rs, runs, C5["2xl"])  # the next run is on ml.c5.2xlarge already: nothing to undo
    assert gone.groups[0].action != "undone" and gone.blocked == {}, gone.groups[0].reason


def test_rule_f_each_agreeing_run_not_only_the_last_must_be_under_used() -> None:
    first = record(1, ratio=0.25, data_type=C5["2xl"], cpu_scale=1.4, run_id="busy")  # 35 % > 30 %
    runs = [first, record(1, ratio=0.25, data_type=C5["2xl"], run_id="idle")]  # then 25 %
    group = decided(policy(), runs, C5["2xl"]).groups[0]
    assert group.next_type == C5["2xl"] and group.reason == "the verdict holds it", group.reason
    assert decided(policy(), idle_runs(C5["2xl"]), C5["2xl"]).groups[0].next_type == C5["xl"]
