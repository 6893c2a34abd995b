"""Capacity and quotas of the offline endpoint, through boto3 as a client sees them.

Each test limits an instance type no other test of the module limits, so they share one endpoint;
every limit a test sets is lifted again at its end.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.local_jobkit import BUCKET, log_lines, put_source, request, unique, wait
from support.service_model import check_answer

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.api.control import CAPACITY_PATH, change_capacity
from airflow_hetero.local.host.process import HostProcess

pytestmark = pytest.mark.slow

ENDPOINT_RUN: dict[str, Any] = {"stop_grace": 1.0}
#: SageMaker's reason, verbatim (DESIGN.md section 9).
CAPACITY_ERROR = (
    "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
)
SLEEPER = "import time\ntime.sleep(60)\n"


@pytest.fixture
def limits(endpoint: LocalEndpoint) -> Iterator[LocalEndpoint]:
    """The endpoint; every type a test limited is unlimited again afterwards."""
    yield endpoint
    state = endpoint.capacity_state()
    endpoint.set_capacity(dict.fromkeys(state["capacity"]))
    endpoint.set_quota(dict.fromkeys(state["quota"]))


@pytest.fixture
def started_hosts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the hosts the endpoint starts during the test."""
    started: list[str] = []
    real = HostProcess.start

    def start(self: HostProcess) -> int:
        started.append(self.name)
        return real(self)

    monkeypatch.setattr(HostProcess, "start", start)
    return started


def _job(s3: Any, name: str, groups: tuple[tuple[str, str, int], ...], script: str = "print('ran')") -> dict[str, Any]:
    return request(name, put_source(s3, name, script), groups=groups)


def test_a_job_beyond_capacity_fails_with_sagemakers_reason_and_starts_no_host(
    limits: LocalEndpoint, sm: Any, s3: Any, logs: Any, started_hosts: list[str]
) -> None:
    limits.set_capacity({"ml.p4d.24xlarge": 0})
    job = unique("nocapacity")
    sm.create_training_job(**_job(s3, job, (("data", "ml.c5.xlarge", 2), ("train", "ml.p4d.24xlarge", 1))))
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Failed" and done["SecondaryStatus"] == "Failed"
    assert done["FailureReason"] == CAPACITY_ERROR
    transitions = done["SecondaryStatusTransitions"]
    assert [t["Status"] for t in transitions] == ["Starting", "Failed"]
    waiting = "Insufficient capacity error from EC2 while launching instances, retrying!"  # botocore's documented one
    assert transitions[0]["StatusMessage"] == waiting
    assert all("EndTime" in t for t in transitions)
    for never in ("BillableTimeInSeconds", "TrainingTimeInSeconds", "TrainingStartTime"):
        assert never not in done  # no instance ever ran: nothing billed (botocore: BillableTimeInSeconds >= 1)
    check_answer("DescribeTrainingJob", done)
    assert started_hosts == []
    assert [p.name for p in limits.job_dir(job).iterdir()] == ["job.json"]  # no source, hosts.json nor logs
    assert log_lines(logs, job) == {}
    assert limits.capacity_state()["running"] == {} and limits.capacity_state()["utilization"] == {}
    summary = sm.list_training_jobs(NameContains=job)["TrainingJobSummaries"]
    assert [(s["TrainingJobStatus"], s["SecondaryStatus"]) for s in summary] == [("Failed", "Failed")]
    check_answer("ListTrainingJobs", sm.list_training_jobs(NameContains=job))


def test_a_second_job_does_not_fit_while_the_first_runs_and_fits_once_it_ended(
    limits: LocalEndpoint, sm: Any, s3: Any
) -> None:
    limits.set_capacity({"ml.g5.12xlarge": 2})
    first, second, third = unique("holds"), unique("nofit"), unique("fits")
    sm.create_training_job(**_job(s3, first, (("train", "ml.g5.12xlarge", 2),), SLEEPER))
    wait(sm, first, secondary="Training")
    assert limits.capacity_state()["running"] == {"ml.g5.12xlarge": 2}
    sm.create_training_job(**_job(s3, second, (("data", "ml.c5.xlarge", 1), ("train", "ml.g5.12xlarge", 1))))
    assert wait(sm, second)["FailureReason"] == CAPACITY_ERROR
    assert sm.describe_training_job(TrainingJobName=first)["TrainingJobStatus"] == "InProgress"
    sm.stop_training_job(TrainingJobName=first)
    assert wait(sm, first)["TrainingJobStatus"] == "Stopped"
    assert limits.capacity_state()["running"] == {}  # freed before the job is seen ended
    sm.create_training_job(**_job(s3, third, (("data", "ml.c5.xlarge", 1), ("train", "ml.g5.12xlarge", 1))))
    assert wait(sm, third)["TrainingJobStatus"] == "Completed"
    # freed capacity does not rescue a job that already failed: SageMaker does not queue
    assert sm.describe_training_job(TrainingJobName=second)["FailureReason"] == CAPACITY_ERROR


def test_capacity_raised_while_serving_lets_the_next_create_run(limits: LocalEndpoint, sm: Any, s3: Any) -> None:
    limits.set_capacity({"ml.g4dn.xlarge": 0})
    before, after = unique("before-raise"), unique("after-raise")
    sm.create_training_job(**_job(s3, before, (("train", "ml.g4dn.xlarge", 1),)))
    assert wait(sm, before)["FailureReason"] == CAPACITY_ERROR
    state = change_capacity(limits.url, capacity={"ml.g4dn.xlarge": 1})  # over HTTP, as another process would
    assert state["capacity"]["ml.g4dn.xlarge"] == 1
    sm.create_training_job(**_job(s3, after, (("train", "ml.g4dn.xlarge", 1),)))
    assert wait(sm, after)["TrainingJobStatus"] == "Completed"
    assert sm.describe_training_job(TrainingJobName=before)["TrainingJobStatus"] == "Failed"


def test_a_create_beyond_the_quota_is_refused_in_the_services_words_and_records_nothing(
    limits: LocalEndpoint, sm: Any, s3: Any
) -> None:
    limits.set_quota({"ml.p3.8xlarge": 2})
    running, refused, later = unique("quota-run"), unique("quota-refused"), unique("quota-later")
    sm.create_training_job(**_job(s3, running, (("train", "ml.p3.8xlarge", 1),), SLEEPER))
    body = _job(s3, refused, (("data", "ml.c5.xlarge", 1), ("train", "ml.p3.8xlarge", 2)))
    with pytest.raises(sm.exceptions.ResourceLimitExceeded) as err:  # the modelled error of CreateTrainingJob
        sm.create_training_job(**body)
    assert err.value.response["Error"]["Message"] == (
        "The account-level service limit 'ml.p3.8xlarge for training job usage' is 2 Instances, with current "
        "utilization of 1 Instances and a request delta of 2 Instances. Please use AWS Service Quotas to request an "
        "increase for this quota. If AWS Service Quotas is not available, contact AWS support to request an "
        "increase for this quota."
    )
    assert err.value.response["ResponseMetadata"]["RetryAttempts"] == 0  # a 4xx: not retried
    assert not limits.job_dir(refused).exists()
    with pytest.raises(ClientError):
        sm.describe_training_job(TrainingJobName=refused)
    assert sm.list_training_jobs(NameContains=refused)["TrainingJobSummaries"] == []
    assert limits.capacity_state()["utilization"] == {"ml.p3.8xlarge": 1}
    sm.stop_training_job(TrainingJobName=running)
    wait(sm, running)
    sm.create_training_job(**body)  # the quota is free again, and the name was never taken
    assert wait(sm, refused)["TrainingJobStatus"] == "Completed"
    limits.set_quota({"ml.p3.8xlarge": 0})
    with pytest.raises(sm.exceptions.ResourceLimitExceeded) as err:
        sm.create_training_job(**_job(s3, later, (("train", "ml.p3.8xlarge", 1),)))
    assert "is 0 Instances, with current utilization of 0 Instances and a request delta of 1 Instances" in str(
        err.value
    )


def test_unlimited_by_default(sm: Any, s3: Any, endpoint: LocalEndpoint) -> None:
    assert endpoint.capacity_state() == {"capacity": {}, "quota": {}, "running": {}, "utilization": {}}
    job = unique("unlimited")
    sm.create_training_job(**_job(s3, job, (("train", "ml.p5.48xlarge", 8),)))
    assert wait(sm, job)["TrainingJobStatus"] == "Completed"


def _call(endpoint: LocalEndpoint, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if "json" in (response.getheader("Content-Type") or "") else data
    finally:
        conn.close()


def test_the_control_path_reads_changes_and_refuses_clearly(limits: LocalEndpoint, s3: Any) -> None:
    status, state = _call(limits, "GET", CAPACITY_PATH)
    assert status == 200 and set(state) == {"capacity", "quota", "running", "utilization"}
    status, state = _call(limits, "POST", CAPACITY_PATH, json.dumps({"quota": {"ml.trn1.2xlarge": 3}}).encode())
    assert status == 200 and state["quota"]["ml.trn1.2xlarge"] == 3
    status, state = _call(limits, "POST", CAPACITY_PATH, b'{"quota": {"ml.trn1.2xlarge": null}}')
    assert status == 200 and "ml.trn1.2xlarge" not in state["quota"]
    bad = {
        b'{"capacity": {"ml.bogus": 1}}': "capacity: 'ml.bogus' is not a SageMaker training instance type",
        b'{"capacity": {"ml.trn1.2xlarge": -1}}': "must be a whole number of instances >= 0, not -1",
        b'{"capacity": {"ml.trn1.2xlarge": 1}, "quota": {"ml.bogus": 1}}': "quota: 'ml.bogus'",
        b'{"limits": {}}': 'with "capacity" and/or "quota"',
        b"not json": "not valid JSON",
    }
    for body, message in bad.items():
        status, answer = _call(limits, "POST", CAPACITY_PATH, body)
        assert (status, answer["__type"]) == (400, "ValidationException") and message in answer["message"], body
    assert "ml.trn1.2xlarge" not in limits.capacity_state()["capacity"]  # a refused change changes nothing
    assert _call(limits, "DELETE", CAPACITY_PATH)[0] == 405
    assert _call(limits, "GET", "/_airflow-hetero/other")[0] == 404
    status, answer = _call(limits, "POST", CAPACITY_PATH, b'{"capacity": {"ml.trn1.2xlarge": 0}}', Origin="http://a.b")
    assert status == 403 and b"<Code>AccessDenied</Code>" in answer  # the request guard: no web page gets here
    assert "ml.trn1.2xlarge" not in limits.capacity_state()["capacity"]
    with pytest.raises(ValueError, match=r"refused the change \(400\): capacity: 'ml\.bogus'"):
        change_capacity(limits.url, capacity={"ml.bogus": 1})
    assert change_capacity(limits.url) == limits.capacity_state()
    assert s3.list_objects_v2(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"] == 200  # S3 unaffected
