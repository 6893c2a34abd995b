"""The AWS CLI, a client nobody here wrote, against the offline queue: set-up, submit-service-job,
describe-service-job, list-service-jobs (its RUNNING default and the JOB_NAME filter), terminate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.batch_jobs import gated_payload, release, wait_status

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local import BatchOptions, LocalEndpoint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(sys.executable).with_name("aws").exists(), reason="the AWS CLI is a dev dependency"),
]

ENDPOINT_BATCH = BatchOptions(poll_interval=0.05)
AWS = Path(sys.executable).with_name("aws")


def _aws(endpoint: LocalEndpoint, *args: str, check: bool = True) -> Any:
    env = {**os.environ, **endpoint.environ(), "AWS_PAGER": "", "AWS_CONFIG_FILE": os.devnull}
    done = subprocess.run([str(AWS), "batch", *args], check=False, env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None
    return done


def test_the_aws_cli_submits_describes_lists_and_terminates_service_jobs(
    endpoint: LocalEndpoint, s3: Any, tmp_path: Path
) -> None:
    made = _aws(
        endpoint, "create-service-environment", "--service-environment-name", "cli-env",
        "--service-environment-type", "SAGEMAKER_TRAINING",
        "--capacity-limits", "maxCapacity=1,capacityUnit=NUM_INSTANCES",
    )  # fmt: skip
    assert made["serviceEnvironmentArn"].endswith(":service-environment/cli-env")
    _aws(
        endpoint, "create-job-queue", "--job-queue-name", "cli-queue", "--priority", "1",
        "--job-queue-type", "SAGEMAKER_TRAINING", "--service-environment-order", "order=1,serviceEnvironment=cli-env",
    )  # fmt: skip
    payload = tmp_path / "payload.json"
    payload.write_text(gated_payload(s3, tmp_path, "clijob"))
    submitted = _aws(
        endpoint, "submit-service-job", "--job-name", "cli-job", "--job-queue", "cli-queue",
        "--service-job-type", "SAGEMAKER_TRAINING", "--service-request-payload", f"file://{payload}",
        "--client-token", "cli-token-1",
    )  # fmt: skip
    assert submitted["jobName"] == "cli-job" and submitted["jobArn"].endswith(f"/{submitted['jobId']}")
    waiting = _aws(
        endpoint, "submit-service-job", "--job-name", "cli-waiting", "--job-queue", "cli-queue",
        "--service-job-type", "SAGEMAKER_TRAINING", "--service-request-payload", f"file://{payload}",
    )  # fmt: skip
    wait_status(endpoint.client("batch"), submitted["jobId"], "RUNNING")

    listed = _aws(endpoint, "list-service-jobs", "--job-queue", "cli-queue")  # no filter, no status: RUNNING
    assert [s["jobName"] for s in listed["jobSummaryList"]] == ["cli-job"]
    found = _aws(endpoint, "list-service-jobs", "--job-queue", "cli-queue", "--filters", "name=JOB_NAME,values=CLI-*")
    assert [s["jobName"] for s in found["jobSummaryList"]] == ["cli-waiting", "cli-job"]
    again = _aws(
        endpoint, "submit-service-job", "--job-name", "cli-job", "--job-queue", "cli-queue",
        "--service-job-type", "SAGEMAKER_TRAINING", "--service-request-payload", f"file://{payload}",
        "--client-token", "cli-token-1", check=False,
    )  # fmt: skip
    assert again.returncode != 0 and "reached max retries" not in again.stderr
    assert "An error occurred (ClientException) when calling the SubmitServiceJob operation" in again.stderr

    _aws(endpoint, "terminate-service-job", "--job-id", waiting["jobId"], "--reason", "not needed")
    release(tmp_path, "clijob")
    wait_status(endpoint.client("batch"), submitted["jobId"], "SUCCEEDED")
    described = _aws(endpoint, "describe-service-job", "--job-id", submitted["jobId"])
    assert described["status"] == "SUCCEEDED"
    assert described["statusReason"] == facts.BATCH_STATUS_REASON_PREFIX + "Training job completed"
    arn = described["latestAttempt"]["serviceResourceId"]["value"]
    assert arn.startswith("arn:aws:sagemaker:us-east-1:123456789012:training-job/awsbatchclijob")
    terminated = _aws(endpoint, "describe-service-job", "--job-id", waiting["jobId"])
    assert (terminated["status"], terminated["statusReason"], terminated["attempts"]) == ("FAILED", "not needed", [])
