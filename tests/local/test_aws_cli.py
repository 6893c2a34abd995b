"""The AWS CLI, a client nobody here wrote, against the offline endpoint: a job created from
``airflow-hetero render`` output, then describe, list, list-tags, stop and wait."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.local_jobkit import wait

from airflow_hetero.cli import main as cli_main
from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.training.transfer import parse_s3_uri

pytestmark = pytest.mark.slow

AWS = Path(sys.executable).with_name("aws")

DEFINITION = """
    role: arn:aws:iam::123456789012:role/SageMakerTrainingRole
    framework: pytorch
    framework_version: "2.0"
    py_version: py310
    entry_point: train.py
    source_dir: code
    output_path: s3://cli-tests/models
    instance_groups:
      - instance_group_name: data_group
        instance_type: ml.c5.xlarge
        instance_count: 2
      - instance_group_name: train_group
        instance_type: ml.g5.xlarge
        instance_count: 1
    metric_definitions:
      - Name: train:loss
        Regex: "loss=([0-9.]+)"
    max_run: 600
    tags:
      project: cli
"""


def _ended(endpoint: LocalEndpoint, job: str) -> None:
    """Wait (boto3, polling fast) until ``job`` ended: the CLI's waiter polls only every 120 s, so
    ``aws sagemaker wait`` is called once the job has ended and must then return at once."""
    wait(endpoint.client("sagemaker"), job)


def _aws(endpoint: LocalEndpoint, *args: str, check: bool = True) -> Any:
    env = {**os.environ, **endpoint.environ(), "AWS_PAGER": "", "AWS_CONFIG_FILE": os.devnull}
    done = subprocess.run([str(AWS), *args], check=False, env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None
    return done


@pytest.fixture
def rendered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    """Render a definition whose job sleeps when told (by its name) to."""

    def render(job: str, script: str) -> Path:
        folder = tmp_path / job
        (folder / "code").mkdir(parents=True)
        (folder / "code" / "train.py").write_text(textwrap.dedent(script))
        (folder / "job.yaml").write_text(textwrap.dedent(DEFINITION))
        capsys.readouterr()
        cwd = Path.cwd()
        os.chdir(folder)
        try:
            assert cli_main(["render", "job.yaml", "--job-name", job]) == 0
        finally:
            os.chdir(cwd)
        request = folder / "request.json"
        request.write_text(capsys.readouterr().out)
        return request

    return render


def _upload_source(endpoint: LocalEndpoint, request: Path) -> None:
    """Put the source where the rendered request says it is (what the operator uploads)."""
    body = json.loads(request.read_text())
    bucket, key = parse_s3_uri(json.loads(body["HyperParameters"]["sagemaker_submit_directory"]))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(request.parent / "code" / "train.py", arcname="train.py")
    endpoint.client("s3").put_object(Bucket=bucket, Key=key, Body=buffer.getvalue())


@pytest.mark.skipif(not AWS.exists(), reason="the AWS CLI is a dev dependency (pip install awscli)")
def test_the_aws_cli_runs_a_rendered_job_end_to_end(endpoint: LocalEndpoint, rendered: Any) -> None:
    endpoint.client("s3").create_bucket(Bucket="cli-tests")
    done_request = rendered("cli-done", "print('loss=0.25')\n")
    _upload_source(endpoint, done_request)
    arn = _aws(endpoint, "sagemaker", "create-training-job", "--cli-input-json", f"file://{done_request}")
    assert arn["TrainingJobArn"].endswith(":training-job/cli-done")
    _ended(endpoint, "cli-done")
    _aws(endpoint, "sagemaker", "wait", "training-job-completed-or-stopped", "--training-job-name", "cli-done")
    described = _aws(endpoint, "sagemaker", "describe-training-job", "--training-job-name", "cli-done")
    assert described["TrainingJobStatus"] == "Completed"
    assert [g["InstanceGroupName"] for g in described["ResourceConfig"]["InstanceGroups"]] == [
        "data_group",
        "train_group",
    ]
    assert described["BillableTimeInSeconds"] == described["TrainingTimeInSeconds"]
    assert described["FinalMetricDataList"][0]["MetricName"] == "train:loss"
    assert described["FinalMetricDataList"][0]["Value"] == 0.25
    assert described["ProfilingStatus"] == "Enabled"  # the rendered request has the SDK's ProfilerConfig
    tags = _aws(endpoint, "sagemaker", "list-tags", "--resource-arn", arn["TrainingJobArn"])
    assert tags["Tags"] == [{"Key": "project", "Value": "cli"}]
    listed = _aws(endpoint, "sagemaker", "list-training-jobs", "--name-contains", "cli-")
    assert [s["TrainingJobName"] for s in listed["TrainingJobSummaries"]] == ["cli-done"]

    stop_request = rendered("cli-stop", "import time\ntime.sleep(120)\n")
    _upload_source(endpoint, stop_request)
    _aws(endpoint, "sagemaker", "create-training-job", "--cli-input-json", f"file://{stop_request}")
    _aws(endpoint, "sagemaker", "stop-training-job", "--training-job-name", "cli-stop")
    _ended(endpoint, "cli-stop")
    _aws(endpoint, "sagemaker", "wait", "training-job-completed-or-stopped", "--training-job-name", "cli-stop")
    stopped = _aws(endpoint, "sagemaker", "describe-training-job", "--training-job-name", "cli-stop")
    assert stopped["TrainingJobStatus"] == "Stopped"
    assert stopped["ModelArtifacts"]["S3ModelArtifacts"] == "s3://cli-tests/models/cli-stop/output/model.tar.gz"

    refused = _aws(
        endpoint, "sagemaker", "update-training-job", "--training-job-name", "cli-done",
        "--resource-config", "KeepAlivePeriodInSeconds=60", check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "reached max retries" not in refused.stderr  # a 4xx answered once, not a 5xx retried
    assert "ValidationException" in refused.stderr and "SageMaker.UpdateTrainingJob is not emulated" in refused.stderr


@pytest.mark.skipif(not AWS.exists(), reason="the AWS CLI is a dev dependency (pip install awscli)")
def test_the_aws_cli_sees_quota_refusals_and_capacity_failures(endpoint: LocalEndpoint, rendered: Any) -> None:
    endpoint.client("s3").create_bucket(Bucket="cli-tests")
    request = rendered("awscap-job", "print('ran')\n")  # train_group: 1 x ml.g5.xlarge
    _upload_source(endpoint, request)
    endpoint.set_quota({"ml.g5.xlarge": 0})
    try:
        refused = _aws(
            endpoint, "sagemaker", "create-training-job", "--cli-input-json", f"file://{request}", check=False
        )
        assert refused.returncode != 0 and "reached max retries" not in refused.stderr
        assert (
            "An error occurred (ResourceLimitExceeded) when calling the CreateTrainingJob operation: The "
            "account-level service limit 'ml.g5.xlarge for training job usage' is 0 Instances"
        ) in refused.stderr
        endpoint.set_quota({"ml.g5.xlarge": None})
        endpoint.set_capacity({"ml.g5.xlarge": 0})
        _aws(endpoint, "sagemaker", "create-training-job", "--cli-input-json", f"file://{request}")
        _ended(endpoint, "awscap-job")
        failed = _aws(endpoint, "sagemaker", "describe-training-job", "--training-job-name", "awscap-job")
    finally:
        endpoint.set_quota({"ml.g5.xlarge": None})
        endpoint.set_capacity({"ml.g5.xlarge": None})
    assert failed["TrainingJobStatus"] == "Failed"
    assert failed["FailureReason"].startswith("CapacityError: Unable to provision requested ML compute capacity.")
    assert "BillableTimeInSeconds" not in failed
