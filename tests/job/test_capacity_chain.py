"""The chain of capacity attempts rebuilt from a task instance's jobs, as a retry walks them."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_hetero.job.capacity_chain import ATTEMPT_TAG, CLUSTER_TAG, CapacityChain
from airflow_hetero.job.capacity_failure import CapacityFailure, failure_of_error
from airflow_hetero.job.capacity_plan import Choice, Cluster, cluster_of, describe_cluster

CAPACITY_ERROR = (
    "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
)


def describe(status: str, instance_type: str, reason: str | None = None) -> dict[str, Any]:
    groups = [
        {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
        {"InstanceGroupName": "dnn", "InstanceType": instance_type, "InstanceCount": 1},
    ]
    answer: dict[str, Any] = {"TrainingJobStatus": status, "ResourceConfig": {"InstanceGroups": groups}}
    if reason is not None:
        answer["FailureReason"] = reason
    return answer


def test_a_capacity_failure_is_an_attempt_and_the_job_after_it_keeps_the_chain() -> None:
    for last in ("InProgress", "Stopping", "Completed"):
        chain = CapacityChain(new_round=False)
        assert chain.observe("job-1", describe("Failed", "ml.p4d.24xlarge", CAPACITY_ERROR)) is not None
        # a retry may find the fallback job running, stopping or already completed: the attempt stays
        assert chain.observe("job-2", describe(last, "ml.g5.2xlarge")) is None
        assert [a["job_name"] for a in chain.as_result()] == ["job-1"], last


def test_another_failure_or_a_stop_starts_a_new_chain() -> None:
    for status, reason in (("Failed", "AlgorithmError: exit 1"), ("Stopped", None)):
        chain = CapacityChain(new_round=False)
        chain.observe("job-1", describe("Failed", "ml.p4d.24xlarge", CAPACITY_ERROR))
        chain.observe("job-2", describe(status, "ml.g5.2xlarge", reason))
        assert chain.as_result() == [], status


# --- one test per rule of the chain (docs/capacity.md, "What the operator does"), each seen failing on a mutant
# of its rule ----------------------------------------------------------------------------------------------

P4D, P5, G5 = "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.2xlarge"


def quota_message(instance_type: str) -> str:
    return f"The account-level service limit '{instance_type} for training job usage' is 0 Instances"


QUOTA_P5 = quota_message(P5)


def request(instance_type: str = P4D) -> dict[str, Any]:
    return {key: value for key, value in describe("InProgress", instance_type).items() if key == "ResourceConfig"}


def cluster_with(instance_type: str, count: int) -> Cluster:
    return (Choice("data", "ml.c5.xlarge", 1), Choice("dnn", instance_type, count))


def planned(limit: int | None = None) -> CapacityChain:
    chain = CapacityChain(limit=limit)
    chain.plan_from(request(), {"dnn": [(P5, 1), (G5, 2)]})
    return chain


def quota(instance_type: str = P5) -> CapacityFailure:
    failure = failure_of_error("ResourceLimitExceeded", quota_message(instance_type))
    assert failure is not None
    return failure


def test_rule_the_first_submit_is_the_job_as_written_and_needs_a_plan() -> None:
    with pytest.raises(ValueError, match="before plan_from"):
        CapacityChain().next()
    chain = planned(limit=0)  # the job as written is always sent, whatever the bound
    assert chain.next() == cluster_of(request()) and chain.number == 1


def test_rule_the_plan_is_made_once_from_the_first_request() -> None:
    chain = planned()
    chain.plan_from(request(G5), {})  # a later request (the next cluster's) does not replace the plan
    assert chain.plan is not None and chain.plan.first == cluster_of(request())


def test_rule_each_capacity_failure_is_one_attempt_and_the_next_cluster_follows_the_plan() -> None:
    chain = planned()
    assert chain.observe("job-1", describe("Failed", P4D, CAPACITY_ERROR)) is not None
    assert chain.observe("job-1", describe("Failed", P4D, CAPACITY_ERROR)) is not None  # seen again: one attempt
    assert chain.number == 2 and [a["job_name"] for a in chain.as_result()] == ["job-1"]
    after = chain.next()
    assert after is not None and describe_cluster(after) == "data=1 x ml.c5.xlarge, dnn=1 x ml.p5.48xlarge"


def test_rule_capacity_attempts_bounds_the_clusters_tried_the_job_as_written_included() -> None:
    chain = planned(limit=2)
    chain.observe("job-1", describe("Failed", P4D, CAPACITY_ERROR))
    assert chain.next() is not None
    chain.observe("job-2", describe("Failed", P5, CAPACITY_ERROR))
    assert chain.next() is None  # a third cluster is left, the bound says 2
    error = chain.exhausted_error()
    assert "capacity=CapacityFallback(attempts=2) reached" in str(error) and "2 attempts" in str(error)
    assert planned(limit=3).next() is not None


def test_rule_a_refused_create_is_an_attempt_without_a_job_and_rules_its_type_out() -> None:
    chain = planned()
    chain.observe("job-1", describe("Failed", P4D, CAPACITY_ERROR))
    second = chain.next()
    assert second is not None
    chain.refused(second, quota(), "ResourceLimitExceeded")
    assert chain.as_result()[-1] == {
        "job_name": None,
        "instance_groups": [
            {"name": "data", "type": "ml.c5.xlarge", "count": 1},
            {"name": "dnn", "type": P5, "count": 1},
        ],
        "reason": f"ResourceLimitExceeded: {QUOTA_P5}",
    }
    third = chain.next()
    assert third is not None and describe_cluster(third) == "data=1 x ml.c5.xlarge, dnn=2 x ml.g5.2xlarge"
    assert chain.fallback_message(third).startswith("Capacity: the create (data=1 x ml.c5.xlarge, dnn=1 x ml.p5")
    assert chain.fallback_message(third).endswith("Attempt 3: dnn ml.p5.48xlarge x1 -> ml.g5.2xlarge x2")


def test_rule_the_attempts_survive_a_deferral_each_once() -> None:
    chain = planned()
    chain.observe("job-1", describe("Failed", P4D, CAPACITY_ERROR))
    second = chain.next()
    assert second is not None
    chain.refused(second, quota(), "ResourceLimitExceeded")
    kept = chain.as_result()
    resumed = planned()
    resumed.restore([*kept, kept[0], {"job_name": "job-9", "instance_groups": [], "reason": "AlgorithmError: x"}])
    assert resumed.as_result() == kept  # the same attempts, a repeated one once, a non-capacity one left out
    assert resumed.next() == chain.next()  # the refused type is still ruled out
    resumed.restore(None)
    assert resumed.as_result() == kept


def test_rule_every_submit_is_tagged_with_its_attempt_and_cluster() -> None:
    chain = planned()
    chain.observe("job-1", describe("Failed", P4D, CAPACITY_ERROR))
    after = chain.next()
    assert after is not None
    assert chain.tags(after) == [
        {"Key": ATTEMPT_TAG, "Value": "2"},
        {"Key": CLUSTER_TAG, "Value": "data=1 x ml.c5.xlarge / dnn=1 x ml.p5.48xlarge"},  # no commas in tags
    ]


def test_rule_the_log_line_names_the_failed_job_and_only_the_groups_that_move() -> None:
    chain = planned()
    chain.observe("job-1", describe("Failed", P4D, CAPACITY_ERROR))
    after = chain.next()
    assert after is not None
    assert chain.fallback_message(after) == (
        "Capacity: job job-1 (data=1 x ml.c5.xlarge, dnn=1 x ml.p4d.24xlarge) failed: CapacityError: Unable to "
        "provision requested ML compute capacity. Please retry using a different ML instance type. "
        "Attempt 2: dnn ml.p4d.24xlarge x1 -> ml.p5.48xlarge x1"
    )
    assert chain.moves(chain.attempts[-1].cluster) == "no group moved"


def test_rule_when_every_cluster_failed_one_error_lists_each_attempt() -> None:
    chain = planned()
    for name, kind in (("job-1", P4D), ("job-2", P5)):
        chain.observe(name, describe("Failed", kind, CAPACITY_ERROR))
    chain.refused(cluster_with(G5, 2), quota(G5), "ResourceLimitExceeded")
    assert chain.next() is None
    error = chain.exhausted_error()
    message = str(error)
    assert message.startswith("No capacity for this job (every cluster was tried; docs/capacity.md), 3 attempts:")
    assert "  1. job-1: data=1 x ml.c5.xlarge, dnn=1 x ml.p4d.24xlarge: CapacityError" in message
    assert (
        "  3. (create refused, no job): data=1 x ml.c5.xlarge, dnn=2 x ml.g5.2xlarge: ResourceLimitExceeded" in message
    )
    assert error.attempts == chain.as_result()
