"""The offline queue's API as Batch states it: refusals in Batch's words, ListServiceJobs' filters,
status default and paging, newest first, and answers that fit botocore's output shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest
import requests
from support.batch_jobs import make_queue, submit, until
from support.service_model import check_answer

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local import BatchOptions, LocalEndpoint

pytestmark = pytest.mark.slow

ENDPOINT_BATCH = BatchOptions(poll_interval=0.05)
PAYLOAD = json.dumps({"TrainingJobName": "p"})
#: How long the endpoint may take to answer one raw request (on a loaded machine).
HTTP_TIMEOUT = 30


@pytest.fixture(scope="module")
def batch(endpoint: LocalEndpoint) -> Any:
    client = endpoint.client("batch")
    make_queue(client, "idle", 4, state="DISABLED")  # jobs stay RUNNABLE: nothing is admitted
    policy = client.create_scheduling_policy(name="shares", fairsharePolicy={})["arn"]
    make_queue(client, "shared", 4, policy=policy, state="DISABLED")
    return client


def _refusal(call: Any, **kwargs: Any) -> str:
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        call(**kwargs)
    error = caught.value.response["Error"]
    assert error["Code"] == "ClientException"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    return str(error["Message"])


def _submit(batch: Any, **overrides: Any) -> str:
    kwargs = {
        "jobName": "j",
        "jobQueue": "idle",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "serviceRequestPayload": PAYLOAD,
    }
    return _refusal(batch.submit_service_job, **{**kwargs, **overrides})


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"jobName": "has space"}, "Error executing request, Exception : Job name should match valid pattern"),
        ({"jobName": "x" * 129}, "Job name should match valid pattern: up to 128 characters"),
        ({"schedulingPriority": 10000}, "schedulingPriority must be between 0 and 9999; got 10000"),
        ({"retryStrategy": {"attempts": 11}}, "retryStrategy.attempts must be between 1 and 10; got 11"),
        ({"retryStrategy": {"attempts": 0}}, "retryStrategy.attempts must be between 1 and 10; got 0"),
        ({"serviceRequestPayload": "x" * 10241}, "serviceRequestPayload is 10241 bytes; the maximum is 10240"),
        ({"jobQueue": "nowhere"}, "JobQueue nowhere not found."),  # Batch's words, without the executing prefix
        ({"shareIdentifier": "a"}, "shareIdentifier is not allowed: job queue idle has no fair-share"),
        ({"jobQueue": "shared"}, "shareIdentifier is required: job queue shared has a fair-share scheduling policy"),
        ({"clientToken": "t" * 65}, "Value '" + "t" * 65 + "' at 'clientToken' failed to satisfy constraint: Member "
         "must have length less than or equal to 64"),
        ({"quotaShareName": "q"}, "quotaShareName is not emulated"),
    ],
)  # fmt: skip
def test_submit_refusals_are_worded_as_batch(batch: Any, overrides: dict[str, Any], words: str) -> None:
    assert words in _submit(batch, **overrides)


def test_set_up_refusals(batch: Any) -> None:
    env = [{"order": 1, "serviceEnvironment": "idle-env"}]
    limit = {"reason": "r", "state": "RUNNABLE", "maxTimeSeconds": 599, "action": "TERMINATE"}
    assert "maxTimeSeconds must be between 600 and 86400; got 599" in _refusal(
        batch.create_job_queue, jobQueueName="q1", priority=1, jobQueueType="SAGEMAKER_TRAINING",
        serviceEnvironmentOrder=env, jobStateTimeLimitActions=[limit],
    )  # fmt: skip
    assert "the only supported time-limit action is TERMINATE" in _refusal(
        batch.create_job_queue, jobQueueName="q1", priority=1, jobQueueType="SAGEMAKER_TRAINING",
        serviceEnvironmentOrder=env, jobStateTimeLimitActions=[{**limit, "maxTimeSeconds": 600, "action": "CANCEL"}],
    )  # fmt: skip
    assert "jobQueueType 'ECS' is not emulated" in _refusal(
        batch.create_job_queue, jobQueueName="q1", priority=1, jobQueueType="ECS", serviceEnvironmentOrder=env
    )
    assert "Job queue idle already exists" in _refusal(
        batch.create_job_queue, jobQueueName="idle", priority=1, jobQueueType="SAGEMAKER_TRAINING",
        serviceEnvironmentOrder=env,
    )  # fmt: skip
    assert "capacityUnit 'ml.p4d.24xlarge' is not emulated" in _refusal(
        batch.create_service_environment, serviceEnvironmentName="e1", serviceEnvironmentType="SAGEMAKER_TRAINING",
        capacityLimits=[{"maxCapacity": 1, "capacityUnit": "ml.p4d.24xlarge"}],
    )  # fmt: skip
    assert "Service environment idle-env is still used by job queue(s) idle" in _refusal(
        batch.delete_service_environment, serviceEnvironment="idle-env"
    )
    assert "Batch.DescribeComputeEnvironments is not emulated by the airflow-hetero local endpoint" in _refusal(
        batch.describe_compute_environments
    )
    assert "Only one filter can be used at a time" in _refusal(
        batch.list_service_jobs, filters=[{"name": "JOB_NAME", "values": ["a"]}, {"name": "JOB_NAME", "values": ["b"]}]
    )
    assert "maxResults must be between 1 and 100; got 101" in _refusal(batch.list_service_jobs, maxResults=101)
    assert "Service job nope does not exist" in _refusal(batch.describe_service_job, jobId="nope")


def test_a_request_that_breaks_the_model_is_refused_before_any_client_check(endpoint: LocalEndpoint) -> None:
    """Sent as raw HTTP (no botocore client validates it first): the model's own rules answer."""
    url = f"{endpoint.url}/v1/submitservicejob"
    auth = "AWS4-HMAC-SHA256 Credential=testing/20261206/us-east-1/batch/aws4_request, SignedHeaders=host, Signature=0"
    answer = requests.post(
        url,
        data=json.dumps({"jobName": "x", "priority": "high"}),
        headers={"Authorization": auth},
        timeout=HTTP_TIMEOUT,
    )
    assert answer.status_code == 400 and answer.headers["x-amzn-ErrorType"] == "ClientException"
    message = answer.json()["message"]
    assert "validation errors detected" in message
    assert "Value null at 'jobQueue' failed to satisfy constraint: Member must not be null" in message
    assert "priority" in message  # an unknown member
    bad = requests.post(url, data=b"{not json", headers={"Authorization": auth}, timeout=HTTP_TIMEOUT)
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["message"]


def test_a_duplicate_client_token_is_rejected(batch: Any) -> None:
    first = batch.submit_service_job(
        jobName="tok", jobQueue="idle", serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload=PAYLOAD,
        clientToken="ti-123",
    )  # fmt: skip
    assert "clientToken ti-123 was already received; the second request is rejected" in _submit(
        batch, jobName="tok", clientToken="ti-123"
    )
    found = batch.list_service_jobs(jobQueue="idle", filters=[{"name": "JOB_NAME", "values": ["TOK"]}])
    assert [s["jobId"] for s in found["jobSummaryList"]] == [first["jobId"]]


def test_list_service_jobs_filters_default_status_paging_newest_first(batch: Any, endpoint: LocalEndpoint) -> None:
    ids = [submit(batch, "idle", name, PAYLOAD) for name in ("train-a", "Train-B", "train-c", "other")]
    until(lambda: all(batch.describe_service_job(jobId=i)["status"] == "RUNNABLE" for i in ids), "RUNNABLE")

    def names(**kwargs: Any) -> list[str]:
        answer = batch.list_service_jobs(jobQueue="idle", **kwargs)
        check_answer("ListServiceJobs", answer, "batch")
        return [s["jobName"] for s in answer["jobSummaryList"]]

    assert names() == []  # no filter, no status: only RUNNING jobs, and none runs
    assert names(jobStatus="RUNNABLE")[:4] == ["other", "train-c", "Train-B", "train-a"]  # newest first
    assert names(filters=[{"name": "JOB_NAME", "values": ["TRAIN*"]}]) == ["train-c", "Train-B", "train-a"]
    assert names(filters=[{"name": "JOB_NAME", "values": ["train-b"]}]) == ["Train-B"]
    assert names(jobStatus="SUCCEEDED", filters=[{"name": "JOB_NAME", "values": ["train-b"]}]) == ["Train-B"]
    created = batch.describe_service_job(jobId=ids[2])["createdAt"]
    assert "train-a" in names(filters=[{"name": "BEFORE_CREATED_AT", "values": [str(created)]}])
    assert "train-c" not in names(filters=[{"name": "BEFORE_CREATED_AT", "values": [str(created)]}])

    pages, token = [], None
    while True:
        kwargs = {"jobStatus": "RUNNABLE", "maxResults": 2, **({"nextToken": token} if token else {})}
        answer = batch.list_service_jobs(jobQueue="idle", **kwargs)
        pages.append([s["jobName"] for s in answer["jobSummaryList"]])
        token = answer.get("nextToken")
        if not token:
            break
    assert all(len(p) <= 2 for p in pages)
    flat = [n for p in pages for n in p]
    assert flat == names(jobStatus="RUNNABLE") and len(flat) == len(set(flat))

    described = batch.describe_service_job(jobId=ids[0])
    check_answer("DescribeServiceJob", described, "batch")
    assert (described["status"], described["serviceJobType"], described["jobQueue"]) == (
        "RUNNABLE", "SAGEMAKER_TRAINING", batch.describe_job_queues(jobQueues=["idle"])["jobQueues"][0]["jobQueueArn"]
    )  # fmt: skip
    assert described["startedAt"] == described["createdAt"]  # required by the model; nothing started yet
    snapshot = batch.get_job_queue_snapshot(jobQueue="idle")
    check_answer("GetJobQueueSnapshot", snapshot, "batch")
    front = [j["jobArn"] for j in snapshot["frontOfQueue"]["jobs"]]
    assert front.index(f"{described['jobArn']}") < front.index(batch.describe_service_job(jobId=ids[3])["jobArn"])
    batch.update_service_environment(serviceEnvironment="idle-env", state="DISABLED")
    environments = batch.describe_service_environments(serviceEnvironments=["idle-env"])["serviceEnvironments"]
    assert environments[0]["capacityLimits"] == [{"maxCapacity": 4, "capacityUnit": facts.BATCH_CAPACITY_UNIT}]


def test_the_setup_of_batch_queues(tmp_path: Path) -> None:
    with LocalEndpoint(workdir=tmp_path, batch_queues={"gpu-queue": 4}) as first:
        assert first.batch_setup == [
            "batch job queue gpu-queue (arn:aws:batch:us-east-1:123456789012:job-queue/gpu-queue) on service "
            "environment gpu-queue-env: 4 instance(s)"
        ]
    with LocalEndpoint(workdir=tmp_path, batch_queues={"gpu-queue": 2}) as again:  # kept, resized
        client = again.client("batch")
        queues = client.describe_job_queues()["jobQueues"]
        assert [q["jobQueueName"] for q in queues] == ["gpu-queue"]
        assert queues[0]["serviceEnvironmentOrder"][0]["serviceEnvironment"].endswith(
            ":service-environment/gpu-queue-env"
        )
        envs = client.describe_service_environments()["serviceEnvironments"]
        assert envs[0]["capacityLimits"][0]["maxCapacity"] == 2


def test_the_endpoint_counts_batch_requests_by_operation(tmp_path: Path) -> None:
    endpoint = LocalEndpoint(workdir=tmp_path, batch_queues={"counted": 1})
    with pytest.raises(RuntimeError, match="not started"):
        endpoint.batch_calls()
    with endpoint:
        client = endpoint.client("batch")
        assert endpoint.batch_calls() == {}  # the set-up is not a request
        client.list_service_jobs(jobQueue="counted")
        client.list_service_jobs(jobQueue="counted")
        client.get_job_queue_snapshot(jobQueue="counted")
        with pytest.raises(botocore.exceptions.ClientError):
            client.describe_service_job(jobId="nowhere")  # refused: counted too
        assert endpoint.batch_calls() == {"ListServiceJobs": 2, "GetJobQueueSnapshot": 1, "DescribeServiceJob": 1}
