"""The capacity planner: the clusters of a job in order, the next one after a failure, the request for one."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_hetero.job.capacity_failure import (
    CapacityFailure,
    failure_of_client_error,
    failure_of_error,
    failure_of_reason,
)
from airflow_hetero.job.capacity_plan import (
    Attempt,
    CapacityPlan,
    Choice,
    Cluster,
    cluster_of,
    describe_cluster,
    next_cluster,
    request_for,
)

P4D, P5, G5, C5, C6I = "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge", "ml.c5.xlarge", "ml.c6i.xlarge"
CAPACITY_REASON = (
    "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
)


def quota_message(kind: str) -> str:
    return (
        f"The account-level service limit '{kind} for training job usage' is 0 Instances, with current utilization "
        "of 0 Instances and a request delta of 1 Instances. Please use AWS Service Quotas to request an increase "
        "for this quota. If AWS Service Quotas is not available, contact AWS support to request an increase for "
        "this quota."
    )


def _capacity() -> CapacityFailure:
    failure = failure_of_reason(CAPACITY_REASON)
    assert failure is not None
    return failure


CAPACITY = _capacity()


def quota(kind: str) -> CapacityFailure:
    failure = failure_of_error("ResourceLimitExceeded", quota_message(kind))
    assert failure is not None
    return failure


def two_groups() -> CapacityPlan:
    return CapacityPlan({"train": (P4D, 1), "data": (C5, 2)}, {"train": [(P5, 1), (G5, 2)], "data": [(C6I, 2)]})


def short(cluster: Any) -> str:
    return describe_cluster(cluster) if cluster is not None else "None"


def test_the_documented_order_fewest_steps_first_earlier_group_further_first() -> None:
    assert [short(c) for c in two_groups().clusters()] == [
        "train=1 x ml.p4d.24xlarge, data=2 x ml.c5.xlarge",
        "train=1 x ml.p5.48xlarge, data=2 x ml.c5.xlarge",
        "train=1 x ml.p4d.24xlarge, data=2 x ml.c6i.xlarge",
        "train=2 x ml.g5.48xlarge, data=2 x ml.c5.xlarge",
        "train=1 x ml.p5.48xlarge, data=2 x ml.c6i.xlarge",
        "train=2 x ml.g5.48xlarge, data=2 x ml.c6i.xlarge",
    ]


def test_a_plan_without_fallbacks_is_the_job_alone() -> None:
    plan = CapacityPlan({"train": (P4D, 1)})
    assert list(plan.clusters()) == [plan.first] and not plan.has_fallbacks
    assert next_cluster(plan, [Attempt(plan.first, CAPACITY)]) is None


# (failures in order, the cluster expected after them); each failure applies to the cluster the previous step chose
WALKS: list[tuple[str, list[CapacityFailure], str]] = [
    ("a CapacityError moves the first group one step", [CAPACITY], "train=1 x ml.p5.48xlarge, data=2 x ml.c5.xlarge"),
    (
        "a second CapacityError moves the next group, first group back on its first choice",
        [CAPACITY, CAPACITY],
        "train=1 x ml.p4d.24xlarge, data=2 x ml.c6i.xlarge",
    ),
    (
        "a quota refusal naming the first choice skips every cluster with it",
        [quota(P4D)],
        "train=1 x ml.p5.48xlarge, data=2 x ml.c5.xlarge",
    ),
    (
        "then a CapacityError never comes back to the refused type",
        [quota(P4D), CAPACITY],
        "train=2 x ml.g5.48xlarge, data=2 x ml.c5.xlarge",
    ),
    (
        "a quota refusal of a fallback moves its group on at once",
        [CAPACITY, quota(P5)],
        "train=1 x ml.p4d.24xlarge, data=2 x ml.c6i.xlarge",
    ),
    (
        "a quota refusal naming the other group's type moves that group",
        [quota(C5)],
        "train=1 x ml.p4d.24xlarge, data=2 x ml.c6i.xlarge",
    ),
    ("every cluster tried: exhausted", [CAPACITY] * 6, "None"),
    ("every type of a group refused: exhausted", [quota(P4D), quota(P5), quota(G5)], "None"),
]


@pytest.mark.parametrize(("failures", "expected"), [w[1:] for w in WALKS], ids=[w[0] for w in WALKS])
def test_next_cluster_after_failures(failures: list[CapacityFailure], expected: str) -> None:
    plan = two_groups()
    attempts: list[Attempt] = []
    cluster: Cluster | None = plan.first
    for failure in failures:
        assert cluster is not None, "exhausted too early"
        attempts.append(Attempt(cluster, failure))
        cluster = next_cluster(plan, attempts)
    assert short(cluster) == expected


def test_capacity_errors_walk_every_cluster_once_in_order() -> None:
    plan = two_groups()
    attempts: list[Attempt] = []
    cluster: Cluster | None = plan.first
    while cluster is not None:
        attempts.append(Attempt(cluster, CAPACITY))
        cluster = next_cluster(plan, attempts)
    assert [a.cluster for a in attempts] == list(plan.clusters())


def test_a_type_shared_by_two_groups_moves_both() -> None:
    plan = CapacityPlan({"a": (P4D, 1), "b": (P4D, 1)}, {"a": [(P5, 1)], "b": [(P5, 1)]})
    after = next_cluster(plan, [Attempt(plan.first, quota(P4D))])
    assert after == (Choice("a", P5, 1), Choice("b", P5, 1))


def test_fallbacks_for_an_unknown_group_are_refused() -> None:
    with pytest.raises(ValueError, match="train"):
        CapacityPlan({"data": (C5, 1)}, {"train": [(P5, 1)]})


# --- the request for a cluster ------------------------------------------------------------------

REQUEST: dict[str, Any] = {
    "TrainingJobName": "job-1",
    "AlgorithmSpecification": {"TrainingImage": "img:gpu", "TrainingInputMode": "File"},
    "ResourceConfig": {
        "VolumeSizeInGB": 30,
        "InstanceGroups": [
            {"InstanceGroupName": "train", "InstanceType": P4D, "InstanceCount": 1},
            {"InstanceGroupName": "data", "InstanceType": C5, "InstanceCount": 2},
        ],
    },
    "HyperParameters": {"sagemaker_instance_type": '"null"'},
}


def test_request_for_replaces_types_and_counts_only() -> None:
    plan = CapacityPlan.for_request(REQUEST, {"train": [(G5, 2)]})
    assert plan.first == cluster_of(REQUEST)
    cluster = list(plan.clusters())[1]
    built = request_for(REQUEST, cluster)
    assert built["ResourceConfig"]["InstanceGroups"] == [
        {"InstanceGroupName": "train", "InstanceType": G5, "InstanceCount": 2},
        {"InstanceGroupName": "data", "InstanceType": C5, "InstanceCount": 2},
    ]
    rest = {k: v for k, v in built.items() if k != "ResourceConfig"}
    assert rest == {k: v for k, v in REQUEST.items() if k != "ResourceConfig"}
    assert built["ResourceConfig"]["VolumeSizeInGB"] == 30
    assert REQUEST["ResourceConfig"]["InstanceGroups"][0]["InstanceType"] == P4D  # the given request is untouched
    assert cluster_of(built) == cluster


def test_request_for_a_group_the_request_does_not_have_fails() -> None:
    with pytest.raises(KeyError, match="other"):
        request_for(REQUEST, (Choice("other", P5, 1),))


# --- which failures are about capacity ------------------------------------------------------------


def test_a_capacity_error_reason_names_no_type() -> None:
    assert failure_of_reason(CAPACITY_REASON) == CapacityFailure("capacity", None, CAPACITY_REASON)
    assert failure_of_reason("AlgorithmError: ExecuteUserScriptError") is None
    assert failure_of_reason(None) is None


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        ("ResourceLimitExceeded", quota_message(P4D), ("quota", P4D)),
        (
            "ResourceLimitExceeded",
            "The account-level service limit 'ml.g5.48xlarge for spot training job usage' is 0 Instances",
            ("quota", G5),
        ),
        ("ResourceLimitExceeded", "The account-level service limit 'Number of concurrent training jobs' is 4", None),
        (
            "ResourceLimitExceeded",
            "The account-level service limit 'Maximum number of instances across all training jobs' is 20",
            None,
        ),
        (
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient ml.p5.48xlarge capacity",
            ("capacity", P5),
        ),
        ("InsufficientCapacityError", "Insufficient capacity.", ("capacity", None)),
        ("ValidationException", quota_message(P4D), None),
        ("ResourceInUse", "Training job names must be unique", None),
    ],
)
def test_failures_at_create(code: str, message: str, expected: tuple[str, str | None] | None) -> None:
    failure = failure_of_error(code, message)
    assert (failure.kind, failure.instance_type) == expected if failure else expected is None


def test_a_client_error_is_read_from_its_response() -> None:
    class ClientError(Exception):
        response = {"Error": {"Code": "ResourceLimitExceeded", "Message": quota_message(P5)}}

    failure = failure_of_client_error(ClientError())
    assert failure is not None and failure.instance_type == P5 and failure.refuses_type
    assert failure_of_client_error(ValueError("no response")) is None


# --- one test per planner rule (docs/capacity.md, "The order of the clusters"), each seen failing on a mutant
# of its rule ----------------------------------------------------------------------------------------------


def test_rule_a_groups_choices_are_its_own_type_and_count_then_its_fallbacks_in_order() -> None:
    plan = CapacityPlan({"train": (P4D, 1), "data": (C5, 2)}, {"train": [(G5, 2), (P5, 1)]})
    assert plan.choices == (
        (Choice("train", P4D, 1), Choice("train", G5, 2), Choice("train", P5, 1)),
        (Choice("data", C5, 2),),
    )
    assert plan.first == (Choice("train", P4D, 1), Choice("data", C5, 2)) and plan.has_fallbacks


def test_rule_fewest_steps_first() -> None:
    """Three groups: every cluster of n steps comes before any of n + 1 (the later groups further down)."""
    plan = CapacityPlan(
        {"a": (P4D, 1), "b": (C5, 1), "c": (C6I, 1)},
        {"a": [(P5, 1)], "b": [(C6I, 1), ("ml.m5.xlarge", 1)], "c": [("ml.m5.large", 1)]},
    )
    steps = [
        sum(options.index(choice) for options, choice in zip(plan.choices, c, strict=True)) for c in plan.clusters()
    ]
    assert steps == sorted(steps) and steps[0] == 0 and steps[-1] == 4
    assert len(steps) == len(set(plan.clusters())) == 2 * 3 * 2


def test_rule_among_as_many_steps_the_earlier_group_further_down_first() -> None:
    plan = CapacityPlan({"a": (P4D, 1), "b": (C5, 1)}, {"a": [(P5, 1), (G5, 1)], "b": [(C6I, 1), ("ml.m5.xlarge", 1)]})
    two_steps = [describe_cluster(c) for c in plan.clusters()][3:6]
    assert two_steps == [
        "a=1 x ml.g5.48xlarge, b=1 x ml.c5.xlarge",  # a 2 down, b 0
        "a=1 x ml.p5.48xlarge, b=1 x ml.c6i.xlarge",  # a 1 down, b 1
        "a=1 x ml.p4d.24xlarge, b=1 x ml.m5.xlarge",  # a 0 down, b 2
    ]


def test_rule_a_capacity_error_names_no_type_the_next_untried_cluster_in_the_order() -> None:
    plan = two_groups()
    order = list(plan.clusters())
    # the first cluster after a failure of the third is the second, which was not tried
    assert next_cluster(plan, [Attempt(order[2], CAPACITY)]) == order[0]
    assert next_cluster(plan, [Attempt(order[0], CAPACITY), Attempt(order[2], CAPACITY)]) == order[1]


def test_rule_a_quota_refusal_rules_its_type_out_of_every_later_cluster() -> None:
    plan = two_groups()
    attempts = [Attempt(plan.first, quota(C5))]
    seen = []
    while (cluster := next_cluster(plan, attempts)) is not None:
        seen.append(cluster)
        attempts.append(Attempt(cluster, CAPACITY))
    assert seen and all(choice.instance_type != C5 for cluster in seen for choice in cluster)
    assert len(seen) == 3  # the clusters with data on ml.c6i.xlarge, each once


def test_rule_a_capacity_code_naming_one_type_rules_it_out_too() -> None:
    named = failure_of_error("InsufficientInstanceCapacity", f"We currently do not have sufficient {P5} capacity")
    assert named is not None and named.kind == "capacity" and named.refuses_type
    plan = two_groups()
    after = next_cluster(plan, [Attempt(plan.first, CAPACITY), Attempt(list(plan.clusters())[1], named)])
    assert after is not None and all(choice.instance_type != P5 for choice in after)
    assert describe_cluster(after) == "train=1 x ml.p4d.24xlarge, data=2 x ml.c6i.xlarge"


def test_rule_a_capacity_code_naming_several_types_rules_none_out() -> None:
    both = failure_of_error("InsufficientInstanceCapacity", f"no {P4D} and no {C5} capacity")
    assert both is not None and both.instance_type is None and not both.refuses_type
    plan = two_groups()
    assert next_cluster(plan, [Attempt(plan.first, both)]) == list(plan.clusters())[1]  # it moves one step only


def test_rule_a_right_sized_group_starts_from_its_decided_type_its_fallbacks_as_written() -> None:
    """docs/capacity.md: with right-sizing in apply mode the plan is made from the request as sent (the decided
    type), the fallbacks stay as written; a fallback that is the decided type is in the plan again, with its count."""
    decided = request_for(REQUEST, (Choice("train", P5, 1), Choice("data", C5, 2)))
    plan = CapacityPlan.for_request(decided, {"train": [(P5, 2), (G5, 2)]})
    assert [describe_cluster(c) for c in plan.clusters()] == [
        "train=1 x ml.p5.48xlarge, data=2 x ml.c5.xlarge",
        "train=2 x ml.p5.48xlarge, data=2 x ml.c5.xlarge",
        "train=2 x ml.g5.48xlarge, data=2 x ml.c5.xlarge",
    ]
