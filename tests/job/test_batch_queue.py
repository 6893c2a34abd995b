"""Queue mode's settings and SubmitServiceJob request: Batch's limits, checked before any call."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.job.batch_queue import BatchQueue, BatchQueueError, client_token, submit_request
from airflow_hetero.job.identity import TaskIdentity
from airflow_hetero.job.service_job import (
    attempt_training_jobs,
    failure_message,
    identity_of_service_job,
    latest_training_job,
    state_line,
)

IDENTITY = TaskIdentity("retrain", "train", "manual__1")
ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/"


def request(name: str = "hetero-abcdefgh", **extra: Any) -> dict[str, Any]:
    return {"TrainingJobName": name, "RoleArn": "arn:aws:iam::123456789012:role/R", **extra}


def submit_shape() -> Any:
    model = botocore.session.get_session().get_service_model("batch")
    return model.operation_model("SubmitServiceJob").input_shape


def test_a_full_queue_setting_makes_a_request_botocore_accepts() -> None:
    queue = BatchQueue(
        "arn:aws:batch:us-east-1:123456789012:job-queue/gpu-queue",
        share_identifier="teamA",
        scheduling_priority=0,
        retry_strategy={"attempts": 3, "evaluateOnExit": [{"action": "retry", "onStatusReason": "*Capacity*"}]},
        attempt_timeout=3600,
    )
    sent = submit_request(queue, request(), IDENTITY.tags(), IDENTITY.digest)
    validate_parameters(sent, submit_shape())  # raises ParamValidationError on a wrong shape
    assert sent["schedulingPriority"] == 0  # priority 0 is sent (the SDK v3 drops it)
    assert sent["retryStrategy"]["evaluateOnExit"][0]["action"] == "RETRY"
    assert sent["timeoutConfig"] == {"attemptDurationSeconds": 3600}
    assert sent["tags"]["airflow-hetero:identity"] == IDENTITY.digest
    assert json.loads(sent["serviceRequestPayload"]) == request()
    assert sent["serviceJobType"] == "SAGEMAKER_TRAINING"
    assert sent["jobName"] == "hetero-abcdefgh"


def test_a_plain_name_sends_only_what_it_says() -> None:
    sent = submit_request(BatchQueue("gpu-queue"), request(), [], IDENTITY.digest)
    assert set(sent) == {"jobName", "jobQueue", "serviceJobType", "serviceRequestPayload", "tags", "clientToken"}
    assert BatchQueue.of("gpu-queue") == BatchQueue("gpu-queue")
    assert BatchQueue(queue="q", retry_strategy=2).attempts == 2


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"queue": "gpu queue"}, "neither a job queue name"),
        ({"queue": "q", "scheduling_priority": 10000}, "between 0 and 9999"),
        ({"queue": "q", "scheduling_priority": -1}, "between 0 and 9999"),
        ({"queue": "q", "retry_strategy": 11}, "attempts must be between 1 and 10"),
        ({"queue": "q", "retry_strategy": {"attempts": 0}}, "attempts must be between 1 and 10"),
        ({"queue": "q", "retry_strategy": {"attempts": 2, "evaluateOnExit": [{"action": "MAYBE"}]}}, "RETRY or EXIT"),
        ({"queue": "q", "retry_strategy": {"attempts": 2, "onExit": []}}, "no member onExit"),
        ({"queue": "q", "share_identifier": "team a"}, "share_identifier"),
        ({"queue": "q", "attempt_timeout": 0}, "attempt_timeout"),
    ],
)
def test_settings_batch_refuses_are_refused_at_once(kwargs: dict[str, Any], words: str) -> None:
    queue = kwargs.pop("queue")
    with pytest.raises(BatchQueueError, match=words):
        BatchQueue(queue, **kwargs)


def test_templates_wait_for_rendering() -> None:
    assert BatchQueue("{{ var.value.queue }}", share_identifier="{{ params.team }}").problems() == []


def test_a_payload_over_10_kib_is_refused_naming_its_size() -> None:
    big = request(HyperParameters={f"k{i}": "x" * 200 for i in range(60)})
    with pytest.raises(BatchQueueError, match=r"bytes as JSON; .* at most 10240 \(10 KiB\)"):
        submit_request(BatchQueue("q"), big, [], IDENTITY.digest)


def test_a_training_job_name_too_long_for_batchs_prefix_is_refused() -> None:
    name = "a" * (facts.BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH + 1)
    with pytest.raises(
        BatchQueueError, match=r"at most 23 characters: Batch names each attempt AWSBatch<name><32 hex>"
    ):
        submit_request(BatchQueue("q"), request(name), [], IDENTITY.digest)


def test_the_client_token_is_the_task_instances_and_the_names() -> None:
    token = client_token(IDENTITY.digest, "name-a")
    assert token == client_token(IDENTITY.digest, "name-a")
    assert token != client_token(IDENTITY.digest, "name-b")
    assert token != client_token(TaskIdentity("retrain", "train", "manual__2").digest, "name-a")
    assert len(token) == facts.BATCH_CLIENT_TOKEN_MAX_LENGTH


def test_what_a_service_job_says() -> None:
    service = {
        "jobId": "id-1",
        "jobName": "n",
        "status": "FAILED",
        "statusReason": "Received status from SageMaker: AlgorithmError: boom",
        "attempts": [
            {"serviceResourceId": {"name": "TrainingJobArn", "value": ARN + "AWSBatchn" + "1" * 32}},
            {"serviceResourceId": {"name": "TrainingJobArn", "value": ARN + "AWSBatchn" + "2" * 32}},
        ],
        "latestAttempt": {"serviceResourceId": {"name": "TrainingJobArn", "value": ARN + "AWSBatchn" + "2" * 32}},
        "tags": {"airflow-hetero:identity": IDENTITY.digest},
    }
    assert latest_training_job(service) == "AWSBatchn" + "2" * 32
    assert attempt_training_jobs(service) == ["AWSBatchn" + "1" * 32, "AWSBatchn" + "2" * 32]
    assert identity_of_service_job(service) == IDENTITY.digest
    training = {"TrainingJobName": "t", "TrainingJobStatus": "Failed", "FailureReason": "AlgorithmError: boom"}
    message = failure_message(service, training)
    assert "ended FAILED: Received status from SageMaker: AlgorithmError: boom" in message
    assert "training job t ended Failed: AlgorithmError: boom" in message
    assert "no training job was started" in failure_message({**service, "latestAttempt": None}, None)
    assert (
        state_line({"status": "RUNNABLE", "statusReason": "waiting"}, 3) == "RUNNABLE (waiting), place 3 in the queue"
    )
    assert "not in the first 100" in state_line({"status": "RUNNABLE"}, 0)
