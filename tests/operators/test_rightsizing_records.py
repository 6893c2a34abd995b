"""Right-sizing run after run without Airflow: the training task's decision from the previous decision and the
summary's record (operators/rightsizing_records.evidence, then decide), the summary's record and next decision
(record_next), as tests/dags/test_rightsizing_dag.py chains them through XCom. The runs are the model's
(tests/support/rightsizing_runs.py), so each decision is the same on every machine: a failed run resets the
evidence, a growth whose next run got slower is undone and its count stays blocked, and an under-used data group
at min_count moves to a smaller type and stays."""

from __future__ import annotations

from typing import Any

from support.rightsizing_runs import DATA, SIZED_PRICES, summary

from airflow_hetero.definition.rightsizing import RightSizing
from airflow_hetero.job.rightsizing import decide, next_run_lines
from airflow_hetero.job.rightsizing_types import carried_types, instance_facts
from airflow_hetero.operators.rightsizing_records import evidence, record_next, state_of

BIG, SMALL = "ml.c5.2xlarge", "ml.c5.xlarge"


class Days:
    """The training task and the summary of one DAG, one run a day: what each pushes to XCom."""

    def __init__(self, policy: dict[str, Any], written: int = 1, written_type: str = SMALL) -> None:
        self.policy = RightSizing.of({"mode": "apply", **policy})
        self.written, self.written_types = {DATA: written}, {DATA: written_type}
        listed = [t for b in self.policy.groups.values() for t in b.types or []]
        self.facts = instance_facts(sorted({written_type, *listed}))
        self.previous: dict[str, Any] | None = None  # the training task's decision of the run before
        self.record: dict[str, Any] | None = None  # the summary's record of the run before
        self.runs: list[dict[str, Any]] = []

    def train(self, run_id: str) -> dict[str, Any]:
        """The training task's decision for ``run_id`` (as the operator's decide_now makes it)."""
        history, reset, counts, blocked = evidence(self.previous, self.record, "fp", self.written, "apply")
        types = carried_types(self.previous, "fp", self.written_types, "apply")
        decision = decide(
            self.policy,
            counts,
            history,
            fingerprint="fp",
            prices=SIZED_PRICES,
            blocked=blocked,
            reset=reset,
            types=types,
            facts=self.facts,
            written_types=self.written_types,
        )
        decision.run_id = run_id
        extra = {"written_types": self.written_types, "facts": self.facts}
        return state_of(decision.as_dict(), self.policy, None, SIZED_PRICES, self.written, extra=extra)

    def day(self, run_id: str, status: str = "Completed", **model: Any) -> dict[str, Any]:
        """One run: the task decides, the job runs the decided count and type (the model's summary of it with
        ``model``'s figures), the summary records it and decides the next run."""
        decision = self.train(run_id)
        count, kind = decision["counts"][DATA], (decision["types"] or {}).get(DATA, self.written_types[DATA])
        ran = summary(count, name=f"job-{run_id}", status=status, data_type=kind, **model)
        record, upcoming = record_next(ran, decision, run_id)
        self.previous, self.record = decision, record
        run = {"ran": (count, kind), "decision": decision, "record": record, "next": upcoming}
        self.runs.append(run)
        return run


def test_a_failed_run_resets_the_evidence() -> None:
    days = Days({"groups": {DATA: {"min_count": 1, "max_count": 8}}})
    first = days.day("r1", ratio=5)  # 1 data host starving the trainer: it asks for more
    failed = days.day("r2", ratio=5, status="Failed")
    after = days.day("r3", ratio=5)
    assert [r["ran"][0] for r in days.runs] == [1, 1, 1]
    assert first["record"]["verdict"]["bottleneck"] == DATA  # day 1 asked for more
    assert failed["record"]["outcome"] == "failed"
    # the summary of the failed run decides the next run from no evidence, and says why
    assert failed["next"]["evidence"] == 0 and failed["next"]["reset"] == "r2 ended failed"
    assert "  evidence reset: r2 ended failed" in next_run_lines(failed["next"])
    # the next run's training task: the same reset; its count stays, whatever day 1 said
    decision = after["decision"]
    assert decision["reset"] == "r2 ended failed" and decision["evidence"] == 0
    assert decision["groups"][0]["action"] == "kept" and decision["counts"] == {DATA: 1}
    # after the third run: one run of evidence (its own), where two agreeing runs would have grown the group
    upcoming = after["next"]
    assert upcoming["evidence"] == 1 and upcoming["reset"] is None
    assert upcoming["groups"][0]["reason"] == "1 of 2 runs at this cluster so far"


def test_a_change_whose_next_run_got_slower_is_undone_and_stays_blocked() -> None:
    """1 -> 2 data hosts, and with 2 the data comes from a store 4 x slower: the run takes twice as long."""
    days = Days({"groups": {DATA: {"min_count": 1, "max_count": 8}}, "tolerance": 0.25})
    days.day("r1", ratio=5)
    days.day("r2", ratio=5)
    slowed = days.day("r3", ratio=5, slowdown=4.0)
    undone = days.day("r4", ratio=5)
    assert [r["ran"][0] for r in days.runs] == [1, 1, 2, 1]
    grown = slowed["decision"]["groups"][0]
    assert (grown["action"], grown["count"], grown["next_count"]) == ("changed", 1, 2)
    decision = undone["decision"]
    group = decision["groups"][0]
    assert (group["action"], group["count"], group["next_count"]) == ("undone", 2, 1)
    assert group["reason"] == "the run got slower after 1 -> 2: back to 1"
    figures = group["figures"]
    assert figures["run_seconds"] > 1.25 * figures["run_seconds_before"]
    assert figures["cost"] > figures["cost_before"]
    assert decision["blocked"] == {DATA: [2]} and decision["counts"] == {DATA: 1}
    assert {g["group"]: g["action"] for g in decision["groups"]} == {DATA: "undone"}  # the result's actions
    assert slowed["next"]["groups"] == decision["groups"]  # the summary announced the undo the task made
    assert any("data_group: undone (2 -> 1): the run got slower" in line for line in next_run_lines(slowed["next"]))
    assert undone["next"]["blocked"] == {DATA: [2]}  # the undone count stays blocked in what the next run reads


def test_an_under_used_data_group_at_min_count_moves_to_a_smaller_type_and_stays() -> None:
    """1 data host of ml.c5.2xlarge (types: it and ml.c5.xlarge) busy an eighth of its 8 vCPUs: objective cost."""
    bounds = {"min_count": 1, "max_count": 8, "types": [BIG, SMALL]}
    days = Days({"groups": {DATA: bounds}, "objective": "cost", "tolerance": 0.5}, written_type=BIG)
    for run_id in ("r1", "r2"):
        days.day(run_id, ratio=0.125)
    for run_id in ("r3", "r4"):
        days.day(run_id, ratio=0.125, cpu_scale=2)  # the same work: twice the share of half the vCPUs
    runs = days.runs
    # the jobs the runs asked for: two days as written, then the smaller type
    assert [r["ran"] for r in runs] == [(1, BIG)] * 2 + [(1, SMALL)] * 2
    assert [r["record"]["fallback"] for r in runs] == [False] * 4
    moved = runs[2]["decision"]
    group = moved["groups"][0]
    assert (group["action"], group["type"], group["next_type"], group["count"]) == ("changed", BIG, SMALL, 1)
    assert moved["types"] == {DATA: SMALL} and moved["counts"] == {DATA: 1}
    figures = group["figures"]
    assert (figures["vcpus"], figures["vcpus_after"]) == (8, 4)
    assert figures["cost_per_run_after"] < figures["cost_per_run"]
    # the evidence: the data group under-used on 8 vCPUs in both runs, its CPUs its resource, not the bottleneck
    for run in runs[:2]:
        seen = run["record"]["groups"][DATA]
        assert seen["type"] == BIG and seen["resource"] == "cpu"
        assert seen["busy_percent"] < run["record"]["verdict"]["over_provisioned_percent"]
        assert run["record"]["verdict"]["bottleneck"] != DATA
    after = [r["record"]["groups"][DATA]["busy_percent"] for r in runs[2:]]
    assert all(busy <= figures["target_percent"] for busy in after)
    # then it holds: a run on the new type is new evidence, not undone; two of them find no smaller listed type
    assert runs[3]["decision"]["groups"][0]["action"] == "kept"
    assert runs[3]["decision"]["groups"][0]["reason"] == "1 of 2 runs at this cluster so far"
    upcoming = runs[3]["next"]
    assert upcoming["types"] == {DATA: SMALL} and upcoming["counts"] == {DATA: 1}
    kept = upcoming["groups"][0]
    assert (kept["action"], kept["type"], kept["next_type"]) == ("kept", SMALL, SMALL)
    assert "no smaller type: no cheaper type in types with fewer vCPUs" in kept["reason"]
