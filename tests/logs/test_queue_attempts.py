"""logs/queue_attempts.py: a service job's earlier attempts priced, and the summary's ``queue_attempts``."""

from __future__ import annotations

from typing import Any

from airflow_hetero.logs.queue_attempts import earlier_attempts, queue_attempts
from airflow_hetero.pricing.price_list import Price

PRICES = {t: Price(t, p, "USD", "override") for t, p in (("ml.c5.xlarge", 0.2), ("ml.p3.2xlarge", 3.0))}


def described(status: str, billable: int | None, dnn_type: str = "ml.p3.2xlarge") -> dict[str, Any]:
    groups = [("data_group", "ml.c5.xlarge", 1), ("dnn_group", dnn_type, 2)]
    answer: dict[str, Any] = {
        "TrainingJobStatus": status,
        "ResourceConfig": {
            "InstanceGroups": [{"InstanceGroupName": n, "InstanceType": t, "InstanceCount": c} for n, t, c in groups]
        },
    }
    if billable is not None:
        answer["BillableTimeInSeconds"] = billable
    return answer


def test_each_earlier_attempt_is_described_and_priced_the_latest_left_to_the_summary() -> None:
    jobs = {
        "a1": described("Failed", 600),
        "a2": described("Failed", None),  # never started training (a capacity failure): billed nothing
        "a3": described("Failed", 60, dnn_type="ml.p5.48xlarge"),  # a type without a price
    }
    asked: list[list[str]] = []

    def prices(types: list[str]) -> dict[str, Price]:
        asked.append(types)
        return {t: PRICES[t] for t in types if t in PRICES}

    def describe(name: str) -> dict[str, Any]:
        if name == "gone":
            raise LookupError("ValidationException: Requested resource not found")
        return jobs[name]

    out = earlier_attempts(
        ["a1", "a2", "gone", "a3", "latest"], "Latest", describe_training_job=describe, prices=prices, currency="USD"
    )
    assert [a["training_job"] for a in out] == ["a1", "a2", "gone", "a3"]
    assert out[0] == {"training_job": "a1", "status": "Failed", "billable_seconds": 600, "cost": 1.0333}
    assert out[1] == {"training_job": "a2", "status": "Failed", "billable_seconds": 0, "cost": 0.0}
    assert out[2]["cost"] is None and out[2]["reason"].startswith("not described: ValidationException")
    assert out[3]["cost"] is None and "no price for ml.p5.48xlarge" in out[3]["reason"]
    assert asked[0] == ["ml.c5.xlarge", "ml.p3.2xlarge"]

    service = {"jobName": "train-1", "jobId": "id-1", "jobQueue": "gpu-queue"}
    summary = {"training_job_name": "latest", "status": "Completed", "billable_seconds": 900, "cost": {"total": 2.5}}
    queue = queue_attempts(service, out[:2], summary, currency="USD")
    assert queue["attempts"][-1] == {
        "training_job": "latest",
        "status": "Completed",
        "billable_seconds": 900,
        "cost": 2.5,
    }
    assert (queue["earlier_cost"], queue["total"]) == (1.0333, 3.5333)
    unknown = queue_attempts(service, out, summary, currency="USD")  # one earlier attempt has no price
    assert (unknown["earlier_cost"], unknown["total"]) == (None, None)
    unpriced = queue_attempts(service, out[:1], {**summary, "cost": None}, currency="USD")  # the summary has no cost
    assert unpriced["earlier_cost"] == 1.0333 and unpriced["total"] is None
    assert unpriced["attempts"][-1]["reason"] == "the summary has no cost total for this job"
