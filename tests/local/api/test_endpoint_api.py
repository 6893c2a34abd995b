"""The service's answers over HTTP: request rules, errors, ListTrainingJobs, and every client."""

from __future__ import annotations

import copy
import datetime
import json
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.local_jobkit import BUCKET, channel, put_source, request, unique, wait

from airflow_hetero.local import LocalEndpoint

pytestmark = pytest.mark.slow


def _refused(sm: Any, body: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ClientError) as err:
        sm.create_training_job(**body)
    error = err.value.response["Error"]
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError):  # nothing was recorded
        sm.describe_training_job(TrainingJobName=body["TrainingJobName"])
    return error["Code"], error["Message"]


@pytest.fixture(scope="module")
def source(s3: Any) -> str:
    return put_source(s3, "api-tests", "print('ok')\n")


def test_duplicate_name_is_resource_in_use(sm: Any, source: str) -> None:
    job = unique("dup")
    arn = sm.create_training_job(**request(job, source))["TrainingJobArn"]
    for name in (job, job.upper()):
        with pytest.raises(ClientError) as err:
            sm.create_training_job(**request(name, source))
        assert err.value.response["Error"]["Code"] == "ResourceInUse"
        assert arn in err.value.response["Error"]["Message"]
    wait(sm, job)


def test_unknown_group_in_a_channel(sm: Any, source: str) -> None:
    body = request(unique("badgroup"), source, channels=[channel("train", f"s3://{BUCKET}/x", ["dnn", "gpu"])])
    code, message = _refused(sm, body)
    assert code == "ValidationException"
    assert message == (
        "Instance groups [gpu] assigned to channel train are not defined in ResourceConfig.InstanceGroups [data, dnn]"
    )


def test_all_or_nothing_channel_rule(sm: Any, source: str) -> None:
    channels = [
        channel("train", f"s3://{BUCKET}/a", ["dnn"]),
        channel("extra", f"s3://{BUCKET}/b"),
        channel("eval", f"s3://{BUCKET}/c"),
    ]
    code, message = _refused(sm, request(unique("mixed"), source, channels=channels))
    assert code == "ValidationException"
    assert message == "Some channels have assigned instance groups: [train] while others not: [extra, eval]"


def test_instance_type_next_to_instance_groups(sm: Any, source: str) -> None:
    body = request(unique("both"), source)
    body["ResourceConfig"]["InstanceType"] = "ml.m5.large"
    assert _refused(sm, body) == (
        "ValidationException",
        "InstanceType or InstanceCount cannot be specified with InstanceGroups",
    )
    body = request(unique("both"), source)
    body["ResourceConfig"]["InstanceCount"] = 1
    assert _refused(sm, body)[1] == "InstanceType or InstanceCount cannot be specified with InstanceGroups"


def test_more_than_five_groups(sm: Any, source: str) -> None:
    groups = tuple((f"g{i}", "ml.m5.large", 1) for i in range(6))
    code, message = _refused(sm, request(unique("six"), source, groups=groups))
    assert code == "ValidationException"
    assert message.startswith("1 validation error detected: Value '[")
    assert message.endswith(
        "at 'resourceConfig.instanceGroups' failed to satisfy constraint: Member must have "
        "length less than or equal to 5"
    )


def test_model_constraints_the_client_does_not_check(sm: Any, source: str) -> None:
    body = request("a" * 64, source, groups=(("data", "ml.bogus", 1),))
    body["HyperParameters"].update({f"k{i}": "1" for i in range(100)})
    code, message = _refused(sm, body)
    assert code == "ValidationException"
    assert message.startswith("4 validation errors detected: ")  # the long name breaks its length and pattern
    assert (
        "at 'trainingJobName' failed to satisfy constraint: Member must have length less than or equal to 63" in message
    )
    assert (
        "at 'hyperParameters' failed to satisfy constraint: Member must have length less than or equal to 100"
        in message
    )
    assert "Value 'ml.bogus' at 'resourceConfig.instanceGroups.1.member.instanceType'" in message


@pytest.mark.parametrize("action", ["describe_training_job", "stop_training_job"])
def test_describe_and_stop_check_the_name_against_the_model(sm: Any, action: str) -> None:
    with pytest.raises(ClientError) as err:
        getattr(sm, action)(TrainingJobName="bad_name")  # "Requested resource not found" before the check
    error = err.value.response["Error"]
    assert error["Code"] == "ValidationException"
    assert error["Message"] == (
        "1 validation error detected: Value 'bad_name' at 'trainingJobName' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
    )


def test_duplicate_group_names_and_homogeneous_channel_groups(sm: Any, source: str) -> None:
    body = request(unique("dupgroup"), source, groups=(("a", "ml.m5.large", 1), ("a", "ml.m5.large", 1)))
    assert "unique" in _refused(sm, body)[1]
    homogeneous = request(unique("homo"), source, channels=[channel("train", f"s3://{BUCKET}/x", ["a"])])
    homogeneous["ResourceConfig"] = {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 5}
    assert "can only be specified when ResourceConfig uses InstanceGroups" in _refused(sm, homogeneous)[1]


def test_local_limitations_are_refused_with_a_clear_message(sm: Any, source: str) -> None:
    body = request(unique("pipe"), source, channels=[channel("train", f"s3://{BUCKET}/x")])
    body["InputDataConfig"][0]["InputMode"] = "Pipe"
    assert _refused(sm, body)[1] == "The local endpoint does not support Pipe input mode (channel train)"
    manifest = request(unique("manifest"), source, channels=[channel("train", f"s3://{BUCKET}/x")])
    manifest["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3DataType"] = "ManifestFile"
    assert "supports only S3DataType S3Prefix" in _refused(sm, manifest)[1]


def test_homogeneous_job_runs_as_one_group(endpoint: LocalEndpoint, sm: Any, source: str) -> None:
    job = unique("homogeneous")
    body = request(job, source)
    body["ResourceConfig"] = {"InstanceType": "ml.m5.large", "InstanceCount": 2, "VolumeSizeInGB": 5}
    sm.create_training_job(**body)
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Completed"
    assert done["BillableTimeInSeconds"] == done["TrainingTimeInSeconds"]  # wall clock, not x instances
    config = json.loads((endpoint.job_dir(job) / "hosts/algo-2/input/config/resourceconfig.json").read_text())
    assert config["current_group_name"] == "homogeneousCluster"
    assert config["instance_groups"] == [
        {
            "instance_group_name": "homogeneousCluster",
            "instance_type": "ml.m5.large",
            "hosts": config["instance_groups"][0]["hosts"],
        }
    ]
    assert sorted(config["instance_groups"][0]["hosts"]) == ["algo-1", "algo-2"]


def test_unknown_job_is_requested_resource_not_found(sm: Any) -> None:
    for call in (sm.describe_training_job, sm.stop_training_job):
        with pytest.raises(ClientError) as err:
            call(TrainingJobName="no-such-job")
        assert err.value.response["Error"] == {
            "Code": "ValidationException",
            "Message": "Requested resource not found.",
        }


def test_list_training_jobs(sm: Any, source: str) -> None:
    prefix = unique("listing")
    names = [f"{prefix}-{i}" for i in range(3)]
    for name in names:
        sm.create_training_job(**request(name, source))
    for name in names:
        wait(sm, name)
    failing = f"{prefix}-broken"
    broken = request(failing, source)
    broken["HyperParameters"]["sagemaker_program"] = json.dumps("missing.py")
    sm.create_training_job(**broken)
    wait(sm, failing)

    everything = sm.list_training_jobs(NameContains=prefix.upper(), MaxResults=100)["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in everything] == [failing, *reversed(names)]  # newest first
    summary = everything[-1]
    assert set(summary) == {
        "TrainingJobName",
        "TrainingJobArn",
        "CreationTime",
        "TrainingEndTime",
        "LastModifiedTime",
        "TrainingJobStatus",
        "SecondaryStatus",
    }
    failed = sm.list_training_jobs(NameContains=prefix, StatusEquals="Failed")["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in failed] == [failing]

    pages, token = [], None
    while True:
        kwargs: dict[str, Any] = {"NameContains": prefix, "MaxResults": 3, "SortBy": "Name", "SortOrder": "Ascending"}
        if token:
            kwargs["NextToken"] = token
        answer = sm.list_training_jobs(**kwargs)
        pages.append([s["TrainingJobName"] for s in answer["TrainingJobSummaries"]])
        token = answer.get("NextToken")
        if not token:
            break
    assert pages == [sorted([*names, failing])[:3], sorted([*names, failing])[3:]]
    paginated = sm.get_paginator("list_training_jobs").paginate(NameContains=prefix, PaginationConfig={"PageSize": 1})
    assert sum(len(p["TrainingJobSummaries"]) for p in paginated) == 4
    # botocore sends timestamps as whole epoch seconds: bound with times clearly before/after the jobs
    first, last = everything[-1]["CreationTime"], everything[0]["LastModifiedTime"]
    hour = datetime.timedelta(hours=1)
    assert len(sm.list_training_jobs(NameContains=prefix, CreationTimeAfter=first - hour)["TrainingJobSummaries"]) == 4
    assert sm.list_training_jobs(NameContains=prefix, CreationTimeAfter=last + hour)["TrainingJobSummaries"] == []
    assert sm.list_training_jobs(NameContains=prefix, CreationTimeBefore=first - hour)["TrainingJobSummaries"] == []
    modified = sm.list_training_jobs(NameContains=prefix, LastModifiedTimeBefore=last + hour)
    assert len(modified["TrainingJobSummaries"]) == 4


def test_describe_answer_is_shaped_like_sagemakers(sm: Any, source: str) -> None:
    job = unique("shape")
    body = request(job, source)
    body["Tags"] = [{"Key": "team", "Value": "ml"}]
    body["Environment"] = {"MY_FLAG": "1"}
    body["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
    sm.create_training_job(**copy.deepcopy(body))
    done = wait(sm, job)
    done.pop("ResponseMetadata")
    model = sm.meta.service_model.operation_model("DescribeTrainingJob").output_shape
    assert set(done) <= set(model.members)
    assert "Tags" not in done
    assert done["Environment"] == {"MY_FLAG": "1"}
    assert done["AlgorithmSpecification"]["MetricDefinitions"] == body["AlgorithmSpecification"]["MetricDefinitions"]
    assert done["EnableManagedSpotTraining"] is False
    for required in model.required_members:
        assert required in done


async def test_aiobotocore_client_drives_a_job(endpoint: LocalEndpoint, source: str) -> None:
    import asyncio

    from aiobotocore.session import get_session

    job = unique("async")
    session = get_session()
    async with session.create_client(
        "sagemaker",
        endpoint_url=endpoint.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ) as sm:
        created = await sm.create_training_job(**request(job, source))
        assert created["TrainingJobArn"].endswith(f"training-job/{job}")
        for _ in range(300):
            described = await sm.describe_training_job(TrainingJobName=job)
            if described["TrainingJobStatus"] not in ("InProgress", "Stopping"):
                break
            await asyncio.sleep(0.05)
        assert described["TrainingJobStatus"] == "Completed"
        listed = await sm.list_training_jobs(NameContains=job)
        assert [s["TrainingJobName"] for s in listed["TrainingJobSummaries"]] == [job]
        with pytest.raises(ClientError) as err:
            await sm.describe_training_job(TrainingJobName="no-such-job")
        assert err.value.response["Error"]["Code"] == "ValidationException"
    async with session.create_client(
        "logs",
        endpoint_url=endpoint.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ) as logs:
        streams = await logs.describe_log_streams(
            logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=f"{job}/"
        )
        assert len(streams["logStreams"]) == 3


def test_other_services_share_the_url(endpoint: LocalEndpoint) -> None:
    s3, logs, iam, sts = (endpoint.client(s) for s in ("s3", "logs", "iam", "sts"))
    s3.put_object(Bucket=BUCKET, Key="shared/hello.txt", Body=b"hello")
    assert s3.get_object(Bucket=BUCKET, Key="shared/hello.txt")["Body"].read() == b"hello"
    logs.create_log_group(logGroupName="/shared/group")
    logs.create_log_stream(logGroupName="/shared/group", logStreamName="s")
    logs.put_log_events(
        logGroupName="/shared/group",
        logStreamName="s",
        logEvents=[{"timestamp": int(time.time() * 1000), "message": "m"}],
    )
    events = logs.get_log_events(logGroupName="/shared/group", logStreamName="s", startFromHead=True)["events"]
    assert [e["message"] for e in events] == ["m"]
    role = iam.create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument="{}")["Role"]
    assert role["Arn"] == "arn:aws:iam::123456789012:role/SageMakerRole"
    assert sts.get_caller_identity()["Account"] == "123456789012"
    cloudwatch = endpoint.client("cloudwatch")
    cloudwatch.put_metric_data(Namespace="Shared", MetricData=[{"MetricName": "m", "Value": 1.0}])
    assert cloudwatch.list_metrics(Namespace="Shared")["Metrics"][0]["MetricName"] == "m"


def test_endpoint_addresses_and_airflow_connection(endpoint: LocalEndpoint) -> None:
    assert endpoint.url == f"http://127.0.0.1:{endpoint.port}"
    assert endpoint.port > 0
    assert endpoint.connection_extra() == {"endpoint_url": endpoint.url, "region_name": "us-east-1"}
    conn = json.loads(endpoint.airflow_connection_json())
    assert conn == {"conn_type": "aws", "login": "testing", "password": "testing", "extra": endpoint.connection_extra()}
    env = endpoint.environ("my_aws")
    assert json.loads(env["AIRFLOW_CONN_MY_AWS"]) == conn
    assert env["AWS_ENDPOINT_URL"] == endpoint.url
    from airflow.models.connection import Connection

    parsed = Connection(conn_id="aws_default", uri=endpoint.airflow_connection_uri())
    assert parsed.conn_type == "aws"
    assert parsed.login == "testing"
    assert parsed.extra_dejson == endpoint.connection_extra()
