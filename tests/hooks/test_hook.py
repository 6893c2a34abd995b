"""HeteroTrainingHook: request shape against moto, classification, retries, stop, clients."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from botocore.stub import Stubber
from moto import mock_aws
from support.moto_jobs import MotoJobs, aws_connection_env, hetero_request

from airflow_hetero._retry import RetryPolicy, is_transient
from airflow_hetero.hooks.training import HeteroTrainingHook, is_not_found
from airflow_hetero.job.outcome import classify

FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.002)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def jobs(aws: None, monkeypatch: pytest.MonkeyPatch) -> MotoJobs:
    jobs = MotoJobs()
    jobs.install(monkeypatch)
    return jobs


def stubbed_hook() -> tuple[HeteroTrainingHook, Stubber]:
    hook = HeteroTrainingHook(aws_conn_id=None, region_name="us-east-1", retry_policy=FAST)
    client = boto3.client("sagemaker", region_name="us-east-1")
    hook.__dict__["conn"] = client
    hook.__dict__["create_client"] = client
    return hook, Stubber(client)


def client_error(code: str, message: str = "boom", status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "DescribeTrainingJob",
    )


def test_create_and_describe_keep_the_heterogeneous_request_shape(jobs: MotoJobs) -> None:
    hook = HeteroTrainingHook(aws_conn_id=None, retry_policy=FAST)
    request = hetero_request("hetero-shape-1")
    answer = hook.create_training_job(request)
    assert answer["TrainingJobArn"].endswith(":training-job/hetero-shape-1")
    described = hook.describe_training_job("hetero-shape-1")
    assert described["ResourceConfig"] == request["ResourceConfig"]
    assert "InstanceCount" not in described["ResourceConfig"]
    source = described["InputDataConfig"][0]["DataSource"]["S3DataSource"]
    assert source["InstanceGroupNames"] == ["data_group"]
    assert described["TrainingJobStatus"] == "InProgress"
    assert classify(described) == "running"
    assert jobs.calls["CreateTrainingJob"] == 1


def test_find_returns_none_for_a_missing_job(aws: None) -> None:
    hook = HeteroTrainingHook(aws_conn_id=None, retry_policy=FAST)
    assert hook.find_training_job("no-such-job") is None


def test_find_recognises_the_real_service_not_found_message() -> None:
    hook, stub = stubbed_hook()
    stub.add_client_error(
        "describe_training_job",
        service_error_code="ValidationException",
        service_message="Requested resource not found.",
    )
    with stub:
        assert hook.find_training_job("missing") is None


def test_find_surfaces_other_validation_errors() -> None:
    hook, stub = stubbed_hook()
    stub.add_client_error(
        "describe_training_job", service_error_code="AccessDeniedException", http_status_code=403
    )
    with stub, pytest.raises(ClientError, match="AccessDenied"):
        hook.find_training_job("x")


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("InProgress", "running"),
        ("Stopping", "running"),
        ("Completed", "succeeded"),
        ("Failed", "failed"),
        ("Stopped", "stopped"),
        ("Deleting", "failed"),
    ],
)
def test_classify(status: str, state: str) -> None:
    assert classify({"TrainingJobStatus": status}) == state


def test_classify_rejects_unknown_status() -> None:
    with pytest.raises(ValueError, match="Unknown TrainingJobStatus 'Paused'"):
        classify({"TrainingJobStatus": "Paused", "TrainingJobName": "j"})


DESCRIBE = {
    "TrainingJobName": "j",
    "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/j",
    "TrainingJobStatus": "InProgress",
    "SecondaryStatus": "Training",
    "AlgorithmSpecification": {"TrainingInputMode": "File"},
    "ResourceConfig": {"VolumeSizeInGB": 30},
    "StoppingCondition": {"MaxRuntimeInSeconds": 60},
    "CreationTime": 0,
    "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"},
}


def test_throttling_burst_is_retried_then_answers() -> None:
    hook, stub = stubbed_hook()
    stub.add_client_error(
        "describe_training_job", service_error_code="ThrottlingException", http_status_code=400
    )
    stub.add_client_error("describe_training_job", service_error_code="InternalFailure", http_status_code=500)
    stub.add_client_error("describe_training_job", service_error_code="Whatever", http_status_code=503)
    stub.add_response("describe_training_job", DESCRIBE, {"TrainingJobName": "j"})
    with stub:
        assert hook.describe_training_job("j")["SecondaryStatus"] == "Training"
    stub.assert_no_pending_responses()


def test_transient_errors_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    hook, stub = stubbed_hook()
    for _ in range(FAST.max_attempts):
        stub.add_client_error("describe_training_job", service_error_code="ThrottlingException")
    with stub, pytest.raises(ClientError, match="Throttling"):
        hook.describe_training_job("j")
    stub.assert_no_pending_responses()
    assert sum("transient error" in r.getMessage() for r in caplog.records) == FAST.max_attempts - 1


def test_permanent_error_is_not_retried() -> None:
    hook, stub = stubbed_hook()
    stub.add_client_error(
        "describe_training_job", service_error_code="AccessDeniedException", http_status_code=403
    )
    stub.add_response("describe_training_job", DESCRIBE, {"TrainingJobName": "j"})
    with stub, pytest.raises(ClientError, match="AccessDenied"):
        hook.describe_training_job("j")
    assert len(stub._queue) == 1  # the second answer was never asked for


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (client_error("ThrottlingException"), True),
        (client_error("TooManyRequestsException"), True),
        (client_error("ServiceUnavailable", status=503), True),
        (client_error("Odd", status=502), True),
        (client_error("Odd", status=429), True),
        (client_error("ValidationException"), False),
        (client_error("ResourceLimitExceeded"), False),
        (EndpointConnectionError(endpoint_url="http://x"), True),
        (ReadTimeoutError(endpoint_url="http://x"), True),
        (ConnectionResetError(), True),
        (ValueError("x"), False),
    ],
)
def test_is_transient(exc: Exception, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_is_not_found_variants() -> None:
    assert is_not_found(client_error("ValidationException", "Requested resource not found."))
    assert is_not_found(client_error("ValidationException", "Could not find training job 'arn:...'"))
    assert not is_not_found(client_error("ValidationException", "Job name too long"))
    assert not is_not_found(ValueError("not found"))


class LostAnswerClient:
    """Creates the job in moto, then reports a throttling error as if the answer was lost."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.create_calls = 0

    def create_training_job(self, **kwargs: Any) -> dict[str, Any]:
        self.create_calls += 1
        self.real.create_training_job(**kwargs)
        raise client_error("ThrottlingException")

    def describe_training_job(self, **kwargs: Any) -> dict[str, Any]:
        return dict(self.real.describe_training_job(**kwargs))


def test_create_after_a_lost_answer_does_not_submit_twice(jobs: MotoJobs) -> None:
    hook = HeteroTrainingHook(aws_conn_id=None, retry_policy=FAST)
    client = LostAnswerClient(boto3.client("sagemaker", region_name="us-east-1"))
    hook.__dict__["conn"] = client
    hook.__dict__["create_client"] = client
    answer = hook.create_training_job(hetero_request("lost-answer"))
    assert answer["TrainingJobArn"].endswith("/lost-answer")
    assert client.create_calls == 1
    assert jobs.names() == ["lost-answer"]


def test_create_retries_when_the_job_was_not_created() -> None:
    hook, stub = stubbed_hook()
    request = hetero_request("retry-create")
    stub.add_client_error("create_training_job", service_error_code="ThrottlingException")
    stub.add_client_error(
        "describe_training_job",
        service_error_code="ValidationException",
        service_message="Requested resource not found.",
    )
    stub.add_response("create_training_job", {"TrainingJobArn": "arn:x/retry-create"}, request)
    with stub:
        assert hook.create_training_job(request) == {"TrainingJobArn": "arn:x/retry-create"}
    stub.assert_no_pending_responses()


def test_create_client_has_botocore_retries_off_and_keeps_the_hook_config() -> None:
    hook = HeteroTrainingHook(aws_conn_id=None, region_name="us-east-1", config={"read_timeout": 7})
    config = hook.create_client.meta.config
    assert config.retries["total_max_attempts"] == 1 and config.read_timeout == 7
    assert hook.conn.meta.config.retries.get("total_max_attempts") != 1  # polling keeps botocore's retries


def test_create_permanent_error_surfaces() -> None:
    hook, stub = stubbed_hook()
    stub.add_client_error("create_training_job", service_error_code="ResourceLimitExceeded")
    with stub, pytest.raises(ClientError, match="ResourceLimitExceeded"):
        hook.create_training_job(hetero_request("quota"))


def test_stop_running_and_finished_jobs(jobs: MotoJobs) -> None:
    hook = HeteroTrainingHook(aws_conn_id=None, retry_policy=FAST)
    hook.create_training_job(hetero_request("to-stop"))
    assert hook.stop_training_job("to-stop") is True
    assert hook.describe_training_job("to-stop")["TrainingJobStatus"] == "Stopping"
    jobs.set("to-stop", "Stopped", "Stopped")
    assert hook.stop_training_job("to-stop") is False
    assert jobs.calls["StopTrainingJob"] == 2


def test_clients_follow_the_connection_endpoint_and_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(*aws_connection_env("hetero_test", "http://127.0.0.1:9", region="eu-west-1"))
    hook = HeteroTrainingHook(aws_conn_id="hetero_test", verify=False)
    for client in (hook.conn, hook.logs_client, hook.cloudwatch_client, hook.s3_client):
        assert client.meta.endpoint_url == "http://127.0.0.1:9"
        assert client.meta.region_name == "eu-west-1"
    assert hook.logs_client.meta.service_model.service_name == "logs"
    override = HeteroTrainingHook(aws_conn_id="hetero_test", region_name="ap-south-1")
    assert override.logs_client.meta.region_name == "ap-south-1"


def test_upload_bytes(aws: None) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="code")
    hook = HeteroTrainingHook(aws_conn_id=None, retry_policy=FAST)
    hook.upload_bytes(b"tarball", "s3://code/jobs/j/source/sourcedir.tar.gz")
    body = s3.get_object(Bucket="code", Key="jobs/j/source/sourcedir.tar.gz")["Body"].read()
    assert body == b"tarball"
    with pytest.raises(ValueError, match="bucket and a key"):
        hook.upload_bytes(b"x", "s3://code")


def test_identity_of_reads_tags_and_treats_unreadable_tags_as_another_identity() -> None:
    hook, stub = stubbed_hook()
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/j"
    tags = [{"Key": "airflow-hetero:identity", "Value": "d" * 64}]
    stub.add_response("list_tags", {"Tags": tags}, {"ResourceArn": arn})
    stub.add_client_error("list_tags", service_error_code="AccessDeniedException", http_status_code=400)
    with stub:
        assert hook.identity_of({"TrainingJobArn": arn}) == "d" * 64
        assert hook.identity_of({"TrainingJobArn": arn}) is None  # never re-attached on a guess
    stub.assert_no_pending_responses()
