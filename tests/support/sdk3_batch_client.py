"""Drives the SDK v3's AWS Batch queue (``sagemaker.train.aws_batch``) against the offline queue; run with .venv-sdk3.

``python sdk3_batch_client.py WORKDIR QUEUE`` with the environment tests/local/batch/test_batch_sdk3.py
gives (the endpoint's URL, fake credentials). Public API only, as a user would write it:
``TrainingQueue(QUEUE).submit(model_trainer, None, job_name)``, ``wait()``, ``result()`` for a job that
succeeds and one that fails, ``list_jobs(name)``, and ``get_model_trainer()`` (what the SDK rebuilds).
Prints one ``SDK3-BATCH-RESULT`` JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import boto3
from sagemaker.core.helper.session_helper import Session
from sagemaker.train.aws_batch.training_queue import TrainingQueue
from sdk3_client import BUCKET, TRAIN, source, trainer
from sdk3_client import main as prepare_account


def run(workdir: Path, queue_name: str) -> dict[str, Any]:
    prepare_account(workdir, [])  # the role, the bucket and its data, as sdk3_client makes them
    session = Session(boto_session=boto3.Session(), default_bucket=BUCKET)
    src = source(workdir, "train", {"train.py": TRAIN, "helper.sh": "#!/bin/sh\necho helper-ran\n"})
    queue = TrainingQueue(queue_name)
    seen: dict[str, Any] = {}

    good = queue.submit(trainer(session, src, counts=(1, 1), base_job_name="q3"), None, job_name="sdk3-good")
    final = good.wait(timeout=300)
    result = good.result(timeout=300)
    seen["good"] = {
        "waited": final["status"],
        "result": {k: result[k] for k in ("status", "statusReason", "jobName", "attempts", "serviceRequestPayload")},
        "listed": [j.job_name for j in queue.list_jobs("sdk3-good")],
    }
    try:
        rebuilt = good.get_model_trainer()
        seen["good"]["rebuilt"] = {
            "training_job": rebuilt._latest_training_job.training_job_name,
            "instance_groups": rebuilt.compute.instance_groups if rebuilt.compute else None,
        }
    except Exception as exc:  # what the SDK does with a heterogeneous job is what the test reports
        seen["good"]["rebuilt"] = {"error": f"{type(exc).__name__}: {exc}"}
    time.sleep(1.1)  # v3 names jobs by the second

    failing = trainer(session, src, counts=(1, 1), base_job_name="q3-fail", environment={"FAIL_GROUP": "dnn"})
    bad = queue.submit(failing, None, job_name="sdk3-bad")
    try:
        bad.result(timeout=300)
        seen["bad"] = {"raised": None}
    except RuntimeError as exc:
        seen["bad"] = {"raised": str(exc), "status": bad.describe()["status"]}
    return seen


if __name__ == "__main__":
    print("SDK3-BATCH-RESULT " + json.dumps(run(Path(sys.argv[1]), sys.argv[2]), default=str), flush=True)
