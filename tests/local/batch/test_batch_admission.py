"""The offline queue admits jobs while their instances fit the service environment, in the queue's order.

Each job is gated (support.batch_jobs): it runs until the test releases it, so the assertions
follow events (a job RUNNING, a job ended), never a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.batch_jobs import (
    gated_payload,
    make_queue,
    peak_instances,
    release,
    submit,
    training_name,
    until,
    wait_status,
)

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local import BatchOptions, LocalEndpoint

pytestmark = pytest.mark.slow

ENDPOINT_BATCH = BatchOptions(poll_interval=0.05)
C5 = "ml.c5.xlarge"


@pytest.fixture(scope="module")
def batch(endpoint: LocalEndpoint) -> Any:
    return endpoint.client("batch")


def _statuses(batch: Any, ids: dict[str, str]) -> dict[str, str]:
    return {name: batch.describe_service_job(jobId=job_id)["status"] for name, job_id in ids.items()}


def test_fifo_admission_sums_instance_groups_and_never_exceeds_capacity(
    endpoint: LocalEndpoint, batch: Any, sm: Any, s3: Any, tmp_path: Path
) -> None:
    make_queue(batch, "fifo", 4)
    sizes = {"fa": ((("a", C5, 2), ("b", C5, 1))), "fb": (("a", C5, 2),), "fc": (("a", C5, 1),), "fd": (("a", C5, 2),)}
    ids = {}
    for name, groups in sizes.items():
        priority = 9999 if name == "fd" else 0  # a FIFO queue ignores priority
        ids[name] = submit(
            batch, "fifo", f"job-{name}", gated_payload(s3, tmp_path, name, groups), schedulingPriority=priority
        )
    wait_status(batch, ids["fa"], "RUNNING")
    # fa holds 3 of 4: fb (2) waits at the head, and fc (1) waits behind it (no back-filling)
    expected = {"fa": "RUNNING", "fb": "RUNNABLE", "fc": "RUNNABLE", "fd": "RUNNABLE"}
    until(lambda: _statuses(batch, ids) == expected, f"{expected}")  # an admitted job never goes back to RUNNABLE
    snapshot = batch.get_job_queue_snapshot(jobQueue="fifo")
    assert [j["jobArn"].rpartition("/")[2] for j in snapshot["frontOfQueue"]["jobs"]] == [
        ids["fb"],
        ids["fc"],
        ids["fd"],
    ]
    assert snapshot["queueUtilization"]["totalCapacityUsage"] == [{"capacityUnit": "NUM_INSTANCES", "quantity": 3.0}]

    release(tmp_path, "fa")
    wait_status(batch, ids["fb"], "RUNNING")
    wait_status(batch, ids["fc"], "RUNNING")  # 2 + 1 fit; fd (2) does not
    assert _statuses(batch, ids)["fd"] == "RUNNABLE"
    release(tmp_path, "fb")
    wait_status(batch, ids["fd"], "RUNNING")
    release(tmp_path, "fc")
    release(tmp_path, "fd")
    ended = {name: wait_status(batch, job_id, "SUCCEEDED") for name, job_id in ids.items()}

    order = sorted(ended, key=lambda n: ended[n]["scheduledAt"])
    assert order == ["fa", "fb", "fc", "fd"]
    instances = {"fa": 3, "fb": 2, "fc": 1, "fd": 2}
    assert peak_instances(sm, [(training_name(ended[n]), instances[n]) for n in ended]) <= 4
    fa = ended["fa"]
    assert fa["capacityUsage"] == [{"capacityUnit": "NUM_INSTANCES", "quantity": 3.0}]
    name = training_name(fa)
    assert (
        name.startswith(("awsbatchfa", "AWSBatchfa"))
        and len(name) == len("AWSBatchfa") + facts.BATCH_ATTEMPT_ID_HEX_LENGTH
    )
    record = sm.describe_training_job(TrainingJobName=name)
    assert record["TrainingJobName"].startswith(facts.BATCH_TRAINING_JOB_PREFIX + "fa")
    assert [g["InstanceCount"] for g in record["ResourceConfig"]["InstanceGroups"]] == [2, 1]
    assert fa["statusReason"] == facts.BATCH_STATUS_REASON_PREFIX + "Training job completed"
    assert fa["createdAt"] <= fa["scheduledAt"] <= fa["startedAt"] <= fa["stoppedAt"]
    assert fa["createdAt"] > 10**12  # milliseconds


def test_fair_share_then_priority_order(batch: Any, s3: Any, tmp_path: Path) -> None:
    policy = batch.create_scheduling_policy(
        name="teams",
        fairsharePolicy={"shareDecaySeconds": 3600, "shareDistribution": [
            {"shareIdentifier": "a", "weightFactor": 1.0}, {"shareIdentifier": "b", "weightFactor": 1.0}]},
    )["arn"]  # fmt: skip
    make_queue(batch, "fair", 1, policy=policy)
    ids = {"x": submit(batch, "fair", "fair-x", gated_payload(s3, tmp_path, "x"), shareIdentifier="a")}
    wait_status(batch, ids["x"], "RUNNING")
    for name, share, priority in (("a1", "a", 1), ("a2", "a", 5), ("b1", "b", 0)):
        payload = gated_payload(s3, tmp_path, name)
        ids[name] = submit(batch, "fair", f"fair-{name}", payload, shareIdentifier=share, schedulingPriority=priority)
    batch.update_service_job(jobId=ids["a1"], schedulingPriority=9999)  # now first within share a
    for name in ("a1", "a2", "b1"):
        wait_status(batch, ids[name], "RUNNABLE")  # the snapshot lists RUNNABLE jobs (not SUBMITTED ones)
    front = batch.get_job_queue_snapshot(jobQueue="fair")["frontOfQueue"]["jobs"]
    # share a has used the capacity (x), b not: b1 goes first; within a, the highest priority
    assert [j["jobArn"].rpartition("/")[2] for j in front] == [ids["b1"], ids["a1"], ids["a2"]]
    started = []
    for name in ("x", "b1", "a1", "a2"):
        release(tmp_path, name)
        if name != "a2":
            following = {"x": "b1", "b1": "a1", "a1": "a2"}[name]
            wait_status(batch, ids[following], "RUNNING")
            started.append(following)
    assert started == ["b1", "a1", "a2"]
    for job_id in ids.values():
        wait_status(batch, job_id, "SUCCEEDED")
    share = batch.list_service_jobs(
        jobQueue="fair", jobStatus="SUCCEEDED", filters=[{"name": "SHARE_IDENTIFIER", "values": ["b"]}]
    )["jobSummaryList"]
    assert [s["jobName"] for s in share] == ["fair-b1"]


def test_a_job_larger_than_the_environment_stays_runnable_and_does_not_block(
    batch: Any, s3: Any, tmp_path: Path
) -> None:
    make_queue(batch, "small", 2)
    big = submit(batch, "small", "too-big", gated_payload(s3, tmp_path, "big", (("a", C5, 2), ("b", C5, 1))))
    small = submit(batch, "small", "fits", gated_payload(s3, tmp_path, "fits"))
    wait_status(batch, small, "RUNNING")
    described = batch.describe_service_job(jobId=big)
    assert described["status"] == "RUNNABLE"
    assert described["statusReason"] == facts.BATCH_MISCONFIGURATION_REASON
    assert described["attempts"] == []
    release(tmp_path, "fits")
    wait_status(batch, small, "SUCCEEDED")
    batch.update_service_environment(
        serviceEnvironment="small-env", capacityLimits=[{"maxCapacity": 3, "capacityUnit": "NUM_INSTANCES"}]
    )  # now it fits: admitted, the reason gone
    running = wait_status(batch, big, "RUNNING")
    assert "statusReason" not in running or running["statusReason"] != facts.BATCH_MISCONFIGURATION_REASON
    batch.terminate_service_job(jobId=big, reason="not needed after all")
    assert wait_status(batch, big, "FAILED")["statusReason"] == "not needed after all"
