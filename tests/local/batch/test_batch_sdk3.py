"""The SageMaker Python SDK v3's AWS Batch queue (``sagemaker.train.aws_batch.TrainingQueue``), unchanged,
against the offline queue: submit a heterogeneous ModelTrainer, ``wait()``, ``result()``, a failing job,
``list_jobs``. It runs in .venv-sdk3 (tests/support/sdk3_batch_client.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local import BatchOptions, LocalEndpoint

pytestmark = pytest.mark.slow

ENDPOINT_RUN = {"stop_grace": 2.0, "metrics_interval": 0.5, "log_flush_interval": 0.2}
ENDPOINT_BATCH = BatchOptions(poll_interval=0.1)
CANDIDATES = (Path(__file__).resolve().parents[3], Path(sys.executable).parents[2])
SDK3_PYTHON = next((p / ".venv-sdk3" / "bin" / "python" for p in CANDIDATES if (p / ".venv-sdk3").exists()), None)
CLIENT = Path(__file__).resolve().parents[2] / "support" / "sdk3_batch_client.py"
SDK_CONFIG = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"


def _has_aws_batch(python: Path) -> bool:
    probe = [str(python), "-c", "import sagemaker.train.aws_batch.training_queue"]
    return subprocess.run(probe, check=False, capture_output=True, timeout=120).returncode == 0


@pytest.mark.skipif(SDK3_PYTHON is None, reason="run `make .venv-sdk3/.installed-stamp` (make test does)")
def test_sdk_v3_training_queue_submits_waits_and_reads_results(endpoint: LocalEndpoint, tmp_path: Path) -> None:
    assert SDK3_PYTHON is not None
    if not _has_aws_batch(SDK3_PYTHON):
        pytest.fail("the .venv-sdk3 SageMaker SDK has no sagemaker.train.aws_batch module (TrainingQueue)")
    batch = endpoint.client("batch")
    batch.create_service_environment(
        serviceEnvironmentName="sdk3-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
        capacityLimits=[{"maxCapacity": 2, "capacityUnit": "NUM_INSTANCES"}],
    )  # fmt: skip
    batch.create_job_queue(
        jobQueueName="sdk3-queue", priority=1, jobQueueType="SAGEMAKER_TRAINING",
        serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "sdk3-env"}],
    )  # fmt: skip
    config = tmp_path / "sagemaker-config.yaml"
    config.write_text(SDK_CONFIG)
    env = {**os.environ, **endpoint.environ(), "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(SDK3_PYTHON), str(CLIENT), str(tmp_path), "sdk3-queue"],
        check=False, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("SDK3-BATCH-RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    seen: dict[str, Any] = json.loads(lines[-1].removeprefix("SDK3-BATCH-RESULT "))

    good = seen["good"]
    assert good["waited"] == "SUCCEEDED" and good["result"]["status"] == "SUCCEEDED"
    assert good["result"]["statusReason"] == facts.BATCH_STATUS_REASON_PREFIX + "Training job completed"
    assert good["listed"] == ["sdk3-good"]
    payload = json.loads(good["result"]["serviceRequestPayload"])
    groups = payload["ResourceConfig"]["InstanceGroups"]  # the SDK keeps the instance groups in the payload
    assert [(g["InstanceGroupName"], g["InstanceCount"]) for g in groups] == [("data", 1), ("dnn", 1)]
    training = good["result"]["attempts"][0]["serviceResourceId"]["value"].rpartition("/")[2]
    record = endpoint.client("sagemaker").describe_training_job(TrainingJobName=training)
    assert record["TrainingJobName"] == facts.BATCH_TRAINING_JOB_PREFIX + payload["TrainingJobName"] + record[
        "TrainingJobName"][-facts.BATCH_ATTEMPT_ID_HEX_LENGTH:]  # fmt: skip
    assert record["TrainingJobStatus"] == "Completed"
    assert [g["InstanceGroupName"] for g in record["ResourceConfig"]["InstanceGroups"]] == ["data", "dnn"]
    # the SDK rebuilds a trainer from ResourceConfig.InstanceType/InstanceCount: a heterogeneous job's groups are lost
    assert good["rebuilt"] == {"training_job": record["TrainingJobName"], "instance_groups": None}

    bad = seen["bad"]
    assert bad["status"] == "FAILED" and bad["raised"] is not None
    assert bad["raised"].startswith(facts.BATCH_STATUS_REASON_PREFIX + "AlgorithmError: host")
    assert "(instance group dnn)" in bad["raised"]
