"""Request mode (``request=``): every guarantee of a definition, for a CreateTrainingJob request as given.

The ``[group/host]`` log lines and the exactly-once create under lost answers are tested in both modes
beside their definition tests (test_operator.py, test_exactly_once.py).
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
import yaml
from support.moto_jobs import ROLE, MotoJobs, hetero_request, mocked_jobs
from support.task_logs import record_logs

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.definition import naming
from airflow_hetero.definition.errors import JobDefinitionError
from airflow_hetero.job.identity import IDENTITY_ENV, IDENTITY_TAG, TaskIdentity
from airflow_hetero.job.outcome import TrainingJobStoppedError
from airflow_hetero.operators import HeteroTrainingOperator

V3_REQUEST = Path(__file__).parents[1] / "data" / "sdk_v3" / "two_groups_torchrun.request.json"
RUN_ID = "manual__2026-01-01"


def provider_config() -> dict[str, Any]:
    """The Amazon provider's ``config``: a request with its own name and a user tag."""
    return hetero_request("provider-job", Tags=[{"Key": "team", "Value": "vision"}])


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    with mocked_jobs(monkeypatch) as jobs:
        yield jobs


def context(run_id: str = RUN_ID) -> dict[str, Any]:
    ti = MagicMock(dag_id="retrain", task_id="train", run_id=run_id, map_index=-1)
    events: defaultdict[Any, SimpleNamespace] = defaultdict(lambda: SimpleNamespace(extra={}))
    return {"ti": ti, "run_id": run_id, "outlet_events": events}


def operator(**kwargs: Any) -> HeteroTrainingOperator:
    kwargs.setdefault("request", provider_config())
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("print_log", False)
    kwargs.setdefault("check_interval", 0.01)
    return HeteroTrainingOperator(task_id="train", aws_conn_id=None, **kwargs)


def name_for(base: str = "provider-job", run_id: str = RUN_ID, attempt: int = 0) -> str:
    return naming.derived_job_name(base, naming.task_key(base, "retrain", "train", run_id, -1), attempt)


def described(name: str) -> dict[str, Any]:
    return boto3.client("sagemaker", region_name="us-east-1").describe_training_job(TrainingJobName=name)


def tags(name: str) -> dict[str, str]:
    client = boto3.client("sagemaker", region_name="us-east-1")
    arn = client.describe_training_job(TrainingJobName=name)["TrainingJobArn"]
    return {t["Key"]: t["Value"] for t in client.list_tags(ResourceArn=arn)["Tags"]}


def test_the_provider_config_is_sent_as_given_under_the_task_instances_name(jobs: MotoJobs) -> None:
    op = operator(wait_for_completion=False)
    logged = record_logs(op)
    result = op.execute(context())
    name = name_for()
    assert jobs.names() == [name] and result["training_job_name"] == name
    assert "TrainingJobName 'provider-job' is replaced by the name derived" in logged.text()
    job = described(name)
    assert job["HyperParameters"] == {"sagemaker_program": '"train.py"', "epochs": "2"}  # nothing added
    assert job["InputDataConfig"][0]["DataSource"]["S3DataSource"]["InstanceGroupNames"] == ["data_group"]
    identity = TaskIdentity.of(context()["ti"])
    assert f'"{IDENTITY_ENV}": "{identity.digest}"' in logged.text()  # the logged request (moto drops Environment)
    assert tags(name)["team"] == "vision" and tags(name)[IDENTITY_TAG] == identity.digest


def test_the_request_sdk_v3_sends_is_sent_unchanged_but_for_name_and_identity(jobs: MotoJobs) -> None:
    sent = json.loads(V3_REQUEST.read_text())
    op = operator(request=copy.deepcopy(sent), wait_for_completion=False)
    name = op.execute(context())["training_job_name"]
    assert name == name_for(naming.sanitize_base(sent["TrainingJobName"]))
    job = described(name)
    assert job["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/bash"]
    assert job["AlgorithmSpecification"]["ContainerArguments"] == sent["AlgorithmSpecification"]["ContainerArguments"]
    assert job["HyperParameters"] == {"epochs": "2", "mode": "fast"}
    assert [c["ChannelName"] for c in job["InputDataConfig"]] == ["train", "code", "sm_drivers"]
    assert job["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600}  # v3's default, as sent


def test_an_explicit_job_name_wins_and_nothing_is_said_about_the_given_one(jobs: MotoJobs) -> None:
    op = operator(job_name="chosen-name", wait_for_completion=False)
    logged = record_logs(op)
    assert op.execute(context())["training_job_name"] == "chosen-name"
    assert "is replaced" not in logged.text()


def test_stopped_fails_and_a_retry_reattaches_instead_of_a_second_job(jobs: MotoJobs) -> None:
    jobs.script(name_for(run_id="r1"), {"status": "Stopped", "secondary": "Stopped"})
    with pytest.raises(TrainingJobStoppedError):
        operator().execute(context("r1"))
    operator(wait_for_completion=False).execute(context("r2"))  # the first try: job running
    jobs.script(name_for(run_id="r2"), {"status": "Completed", "secondary": "Completed"})
    op = operator()
    logged = record_logs(op)
    assert op.execute(context("r2"))["status"] == "Completed"  # the retry
    assert f"Re-attaching to training job {name_for(run_id='r2')}" in logged.text()
    assert jobs.calls["CreateTrainingJob"] == 2  # r1 and r2, once each


def test_a_job_of_the_same_name_without_this_identity_is_not_reattached(jobs: MotoJobs) -> None:
    name = name_for()
    boto3.client("sagemaker", region_name="us-east-1").create_training_job(**hetero_request(name))
    result = operator(wait_for_completion=False).execute(context())
    assert result["training_job_name"] == name_for(attempt=1)


def test_on_kill_and_a_failed_deferral_stop_the_job(jobs: MotoJobs) -> None:
    op = operator(wait_for_completion=False)
    op.execute(context("kill"))
    op.on_kill()
    assert jobs.job(name_for(run_id="kill")).training_job_status == "Stopping"
    operator(wait_for_completion=False).execute(context("fail"))
    with pytest.raises(Exception) as info:  # Airflow's deferral error, which differs by version
        operator().resume_execution("__fail__", {"error": "Trigger timeout"}, context("fail"))  # type: ignore[arg-type]
    assert "Deferral" in type(info.value).__name__
    assert jobs.job(name_for(run_id="fail")).training_job_status == "Stopping"
    assert jobs.calls["StopTrainingJob"] == 2


def test_lineage_and_the_model_asset_come_from_the_requests_data_configs(jobs: MotoJobs) -> None:
    jobs.every_job = [{"status": "Completed", "secondary": "Completed", "BillableTimeInSeconds": 60}]
    op = operator(
        model_asset="s3://bucket/output", prices={"ml.c5.xlarge": 1, "ml.p3.2xlarge": 3}, use_pricing_api=False
    )
    ctx = context()
    result = op.execute(ctx)
    name = result["training_job_name"]
    [event] = ctx["outlet_events"].values()
    assert event.extra["model_artifacts"] == f"s3://bucket/output/{name}/output/model.tar.gz"
    assert event.extra["instance_groups"][0] == {"name": "data_group", "type": "ml.c5.xlarge", "count": 2}
    lineage = op.get_openlineage_facets_on_complete(MagicMock())
    assert lineage is not None
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("s3://bucket", "train")]
    assert lineage.inputs[0].inputFacets["sagemakerChannel"].instanceGroups == ["data_group"]
    assert [d.name for d in lineage.outputs] == [f"output/{name}/output/model.tar.gz"]


def test_a_rendered_request_has_its_numbers_converted(jobs: MotoJobs) -> None:
    request = provider_config()
    request["ResourceConfig"]["InstanceGroups"][0]["InstanceCount"] = "{{ params.hosts }}"
    request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] = "s3://bucket/train/{{ run_id }}/"
    op = operator(request=request, wait_for_completion=False, params={"hosts": 3})
    ctx = {**context(), "params": {"hosts": 3}}
    op.render_template_fields(ctx)  # type: ignore[arg-type]
    name = op.execute(ctx)["training_job_name"]
    job = described(name)
    assert job["ResourceConfig"]["InstanceGroups"][0]["InstanceCount"] == 3
    assert job["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://bucket/train/{RUN_ID}/"


def test_a_rendered_value_the_shape_refuses_fails_without_retry(jobs: MotoJobs) -> None:
    request = provider_config()
    request["ResourceConfig"]["InstanceGroups"][1]["InstanceCount"] = "{{ run_id }}"
    op = operator(request=request)
    with pytest.raises(
        AirflowFailException, match=r"ResourceConfig\.InstanceGroups\[1\]\.InstanceCount: expected an integer"
    ):
        op.render_template_fields(context())  # type: ignore[arg-type]
    assert jobs.calls["CreateTrainingJob"] == 0


def test_an_invalid_request_fails_at_dag_parse_time_naming_its_path() -> None:
    request = provider_config()
    request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["InstanceGroupNames"] = ["gpu"]
    with pytest.raises(
        JobDefinitionError, match=r"InputDataConfig\[0\]\.DataSource\.S3DataSource\.InstanceGroupNames\[0\]"
    ):
        operator(request=request)


def test_job_and_request_are_exclusive() -> None:
    with pytest.raises(ValueError, match=r"give job= \(a definition\) or request= .*not both"):
        operator(job={"role": ROLE}, request=provider_config())
    with pytest.raises(ValueError, match="not neither"):
        HeteroTrainingOperator(task_id="train")


def test_a_request_file_relative_to_the_dag_file_is_rendered(jobs: MotoJobs, tmp_path: Path) -> None:
    from airflow.providers.common.compat.sdk import DAG

    request = provider_config()
    request["HyperParameters"]["run"] = "{{ run_id }}"
    (tmp_path / "requests").mkdir()
    (tmp_path / "requests" / "train.yaml").write_text(yaml.safe_dump(request))
    with DAG("retrain", schedule=None) as dag:
        op = operator(request="requests/train.yaml", wait_for_completion=False)
    dag.fileloc = str(tmp_path / "dag.py")
    ctx = context()
    op.render_template_fields(ctx)  # type: ignore[arg-type]
    assert isinstance(op.request, dict) and op.request["HyperParameters"]["run"] == RUN_ID
    name = op.execute(ctx)["training_job_name"]
    assert described(name)["HyperParameters"]["run"] == RUN_ID


def test_the_moto_stand_in_refuses_what_the_service_refuses(jobs: MotoJobs) -> None:
    """moto accepts any request; the tests' stand-in answers as SageMaker does, from the same rules."""
    client = boto3.client("sagemaker", region_name="us-east-1")
    bad = hetero_request("refused-job")
    bad["ResourceConfig"]["InstanceType"] = "ml.c5.xlarge"
    with pytest.raises(client.exceptions.ClientError, match="cannot be specified with InstanceGroups"):
        client.create_training_job(**bad)
    long_name = hetero_request("x" * 64)
    with pytest.raises(client.exceptions.ClientError, match="at 'trainingJobName' failed to satisfy constraint"):
        client.create_training_job(**long_name)
    assert jobs.names() == []


TRUST = '{"Version": "2012-10-17", "Statement": []}'


def provider_steps_dag(tmp_path: Path, **changes: Any) -> HeteroTrainingOperator:
    """A provider config with S3Operations (a relative path) and a role name, in a DAG file at tmp_path."""
    from airflow.providers.common.compat.sdk import DAG

    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "weights.bin").write_bytes(b"w" * 10)
    (tmp_path / "train.csv").write_text("1,2\n")
    config = {
        **provider_config(),
        "RoleArn": "SageMakerRole",
        "S3Operations": {
            "S3CreateBucket": [{"Bucket": "staging-bucket"}],
            "S3Upload": [
                {"Path": "train.csv", "Bucket": "staging-bucket", "Key": "in/train.csv", "Tar": False},
                {"Path": str(tmp_path / "model"), "Bucket": "staging-bucket", "Key": "in/model.tar.gz", "Tar": True},
            ],
        },
        **changes,
    }
    with DAG("retrain", schedule=None) as dag:
        op = operator(request=config, wait_for_completion=False)
    dag.fileloc = str(tmp_path / "dag.py")
    return op


def test_the_providers_s3_operations_and_role_name_run_before_the_one_create(jobs: MotoJobs, tmp_path: Path) -> None:
    role = boto3.client("iam").create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument=TRUST)["Role"]["Arn"]
    op = provider_steps_dag(tmp_path)
    logged = record_logs(op)
    name = op.execute(context())["training_job_name"]
    assert described(name)["RoleArn"] == role
    s3 = boto3.client("s3", region_name="us-east-1")
    assert s3.get_object(Bucket="staging-bucket", Key="in/train.csv")["Body"].read() == b"1,2\n"  # from the DAG folder
    assert s3.head_object(Bucket="staging-bucket", Key="in/model.tar.gz")["ContentLength"] > 0
    text = logged.text()
    assert f"RoleArn: role name SageMakerRole is {role}" in text
    assert "S3Operations: bucket staging-bucket created" in text
    assert f"S3Operations: uploaded {tmp_path / 'model'} as .tar.gz to s3://staging-bucket/in/model.tar.gz" in text
    assert text.index("S3Operations: uploaded") < text.index("CreateTrainingJob request for")
    assert jobs.calls["CreateTrainingJob"] == 1
    s3.delete_object(Bucket="staging-bucket", Key="in/train.csv")
    again = provider_steps_dag(tmp_path)
    assert again.execute(context())["training_job_name"] == name  # the retry re-attaches ...
    assert "Contents" not in s3.list_objects_v2(Bucket="staging-bucket", Prefix="in/train.csv")  # ... uploading nothing
    assert jobs.calls["CreateTrainingJob"] == 1


def test_an_unknown_role_or_a_missing_path_fails_without_retries_naming_the_field(
    jobs: MotoJobs, tmp_path: Path
) -> None:
    with pytest.raises(AirflowFailException, match="RoleArn: IAM has no role named 'SageMakerRole'"):
        provider_steps_dag(tmp_path).execute(context("r1"))
    boto3.client("iam").create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument=TRUST)
    missing = {"S3Upload": [{"Path": "nowhere.csv", "Bucket": "staging-bucket", "Key": "k", "Tar": False}]}
    with pytest.raises(AirflowFailException, match=r"S3Operations.S3Upload\[0\].Path: '.*nowhere.csv' does not exist"):
        provider_steps_dag(tmp_path, S3Operations=missing).execute(context("r2"))
    folder = {"S3Upload": [{"Path": "model", "Bucket": "staging-bucket", "Key": "k", "Tar": False}]}
    with pytest.raises(AirflowFailException, match="is a folder; set Tar: true"):
        provider_steps_dag(tmp_path, S3Operations=folder).execute(context("r3"))
    assert jobs.names() == []  # no job for any of them


def test_a_bucket_this_account_has_is_said_to_exist_and_one_in_another_region_fails_naming_its_entry(
    jobs: MotoJobs, tmp_path: Path
) -> None:
    boto3.client("iam").create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument=TRUST)
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="staging-bucket")
    op = provider_steps_dag(tmp_path)
    logged = record_logs(op)
    op.execute(context("r1"))
    assert "S3Operations: bucket staging-bucket exists" in logged.text()  # not "created": HeadBucket found it
    europe = {"CreateBucketConfiguration": {"LocationConstraint": "eu-west-1"}}
    boto3.client("s3", region_name="eu-west-1").create_bucket(Bucket="staging-eu", **europe)
    steps = {"S3CreateBucket": [{"Bucket": "staging-bucket"}, {"Bucket": "staging-eu"}]}
    with pytest.raises(
        AirflowFailException,
        match=r"S3Operations.S3CreateBucket\[1\].Bucket: bucket staging-eu is in region eu-west-1, not in us-east-1",
    ):
        provider_steps_dag(tmp_path, S3Operations=steps).execute(context("r2"))
    assert jobs.calls["CreateTrainingJob"] == 1  # r1's only


def test_a_permanent_error_in_a_step_fails_without_retries_naming_it_a_transient_one_does_not(
    jobs: MotoJobs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError

    from airflow_hetero.hooks.training import HeteroTrainingHook

    boto3.client("iam").create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument=TRUST)
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="staging-bucket")
    uploads = {
        "S3Upload": [
            {"Path": "train.csv", "Bucket": "staging-bucket", "Key": "in/train.csv"},
            {"Path": "train.csv", "Bucket": "no-such-bucket", "Key": "in/train.csv"},
        ]
    }
    no_bucket = r"S3Operations.S3Upload\[1\].Bucket: NoSuchBucket \(upload .*train.csv to s3://no-such-bucket/"
    with pytest.raises(AirflowFailException, match=no_bucket):
        provider_steps_dag(tmp_path, S3Operations=uploads).execute(context("r1"))
    error: dict[str, Any] = {}

    def get_role(hook: HeteroTrainingHook, name: str) -> str:
        raise ClientError({"Error": error}, "GetRole")

    monkeypatch.setattr(HeteroTrainingHook, "role_arn", get_role)
    error.update(Code="AccessDenied", Message="not authorized to perform: iam:GetRole")
    with pytest.raises(AirflowFailException, match=r"RoleArn: AccessDenied \(GetRole SageMakerRole: not authorized"):
        provider_steps_dag(tmp_path).execute(context("r2"))
    error.update(Code="Throttling", Message="Rate exceeded")  # still throttled after the hook's retries
    with pytest.raises(ClientError, match="Rate exceeded") as raised:
        provider_steps_dag(tmp_path).execute(context("r3"))
    assert not isinstance(raised.value, AirflowFailException)  # the task's to retry
    assert jobs.names() == []
