"""The chain of capacity attempts rebuilt from a task instance's jobs, as a retry walks them."""

from __future__ import annotations

from typing import Any

from airflow_hetero.job.capacity_chain import CapacityChain

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
