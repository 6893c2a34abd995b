"""The offline queue's state survives an endpoint restart on the same workdir, as training jobs do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest
from support.batch_jobs import gated_payload, release, submit, training_name, wait_status
from support.local_jobkit import BUCKET

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local import BatchOptions, LocalEndpoint, RunOptions

pytestmark = pytest.mark.slow

TIMINGS: dict[str, Any] = {
    "run": RunOptions(stop_grace=1.0, log_flush_interval=0.2),
    "batch": BatchOptions(poll_interval=0.05),
}


def test_queues_and_jobs_survive_a_restart(tmp_path: Path) -> None:
    workdir, gate = tmp_path / "endpoint", tmp_path / "gate"
    gate.mkdir()
    with LocalEndpoint(workdir=workdir, batch_queues={"rq": 1}, **TIMINGS) as first:
        s3, batch = first.client("s3"), first.client("batch")
        s3.create_bucket(Bucket=BUCKET)
        done = submit(batch, "rq", "r-done", gated_payload(s3, gate, "rdone"), clientToken="token-done")
        wait_status(batch, done, "RUNNING")
        release(gate, "rdone")
        wait_status(batch, done, "SUCCEEDED")
        running = submit(batch, "rq", "r-running", gated_payload(s3, gate, "rrun"))
        waiting = submit(batch, "rq", "r-waiting", gated_payload(s3, gate, "rwait"))
        wait_status(batch, running, "RUNNING")
        wait_status(batch, waiting, "RUNNABLE")
        payload = gated_payload(s3, gate, "rwait")
    # the endpoint went away while r-running ran: its training job ended Failed, r-waiting never started

    with LocalEndpoint(workdir=workdir, **TIMINGS) as second:
        batch = second.client("batch")
        assert batch.describe_job_queues(jobQueues=["rq"])["jobQueues"][0]["jobQueueName"] == "rq"
        assert batch.describe_service_job(jobId=done)["status"] == "SUCCEEDED"
        failed = wait_status(batch, running, "FAILED")
        assert failed["statusReason"].startswith(facts.BATCH_STATUS_REASON_PREFIX + "InternalServerError: ")
        assert len(failed["attempts"]) == 1
        wait_status(batch, waiting, "RUNNING")
        release(gate, "rwait")
        resumed = wait_status(batch, waiting, "SUCCEEDED")
        assert training_name(resumed).startswith("awsbatchrwait")
        listed = batch.list_service_jobs(jobQueue="rq", filters=[{"name": "JOB_NAME", "values": ["r-*"]}])
        assert [s["jobName"] for s in listed["jobSummaryList"]] == ["r-waiting", "r-running", "r-done"]
        with pytest.raises(botocore.exceptions.ClientError, match="clientToken token-done was already received"):
            submit(batch, "rq", "r-done", payload, clientToken="token-done")
