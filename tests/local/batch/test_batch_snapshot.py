"""GetJobQueueSnapshot's ``earliestTimeAtPosition``: when the job took its place at the front, on the queue's
own clock (the backend over stand-in training jobs whose statuses the test sets: no process, no time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow_hetero.local.batch.backend import BatchBackend, BatchOptions

PAYLOAD = json.dumps(
    {"TrainingJobName": "snap", "ResourceConfig": {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1}}
)


class TrainingJobs:
    """Training jobs whose records the test writes."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}

    def create(self, request: dict[str, Any], region: str) -> str:
        name = request["TrainingJobName"]
        self.records[name] = {"TrainingJobStatus": "InProgress", "SecondaryStatus": "Starting"}
        return f"arn:aws:sagemaker:{region}:123456789012:training-job/{name.lower()}"

    def describe(self, name: str) -> dict[str, Any] | None:
        return self.records.get(name)

    def stop(self, name: str) -> None:
        self.records[name] = {"TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped"}


def test_a_job_requeued_to_the_same_place_holds_it_from_its_requeue(tmp_path: Path) -> None:
    now = [1_000]
    training = TrainingJobs()
    backend = BatchBackend(tmp_path, training, BatchOptions(requeue_delay=5.0), clock=lambda: now[0])
    limits = [{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}]
    backend.create_service_environment(
        {"serviceEnvironmentName": "e", "serviceEnvironmentType": "SAGEMAKER_TRAINING", "capacityLimits": limits},
        "us-east-1",
    )
    order = [{"order": 1, "serviceEnvironment": "e"}]
    queue = {"jobQueueName": "q", "priority": 1, "jobQueueType": "SAGEMAKER_TRAINING", "serviceEnvironmentOrder": order}
    backend.create_job_queue(queue, "us-east-1")

    def submit(name: str) -> str:
        body = {"jobName": name, "jobQueue": "q", "serviceJobType": "SAGEMAKER_TRAINING"}
        body["serviceRequestPayload"] = PAYLOAD
        return str(backend.submit_service_job(body, "us-east-1")["jobId"])

    def front() -> list[tuple[str, int]]:
        snapshot = backend.get_job_queue_snapshot({"jobQueue": "q"})["frontOfQueue"]["jobs"]
        return [(j["jobArn"].rpartition("/")[2], j["earliestTimeAtPosition"]) for j in snapshot]

    def training_job(job_id: str) -> str:
        return str(backend.job(job_id).attempts[-1]["training_job_name"])

    first, second = submit("first"), submit("second")
    backend.tick()  # first admitted (the queue holds 1 instance), second waits at the front
    assert front() == [(second, 1_000)]
    now[0] = 2_000
    assert front() == [(second, 1_000)]  # still there since 1000
    training.records[training_job(first)] = {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed"}
    backend.tick()  # first ends, second admitted
    assert backend.job(second).status == "SCHEDULED" and front() == []
    now[0] = 3_000
    capacity = "CapacityError: Unable to provision requested ML compute capacity."
    training.records[training_job(second)] = {"TrainingJobStatus": "Failed", "FailureReason": capacity}
    backend.tick()  # requeued: RUNNABLE again, at the front again
    assert backend.job(second).status == "RUNNABLE"
    now[0] = 4_000
    assert front() == [(second, 3_000)]  # since its requeue, not since it first got there
