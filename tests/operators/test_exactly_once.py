"""Exactly one job per task instance under faults: lost answers, collisions, clears, not-found.

The operator runs its real code against a moto server through a loopback proxy
(:mod:`fault_proxy`) that loses, resets, times out or 500s CreateTrainingJob *after* the service
received it. ``jobs.calls["CreateTrainingJob"]`` counts the creates the service received and
``jobs.names()`` the jobs left behind (moto accepts duplicate names, so a blind retry would
leave two jobs).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
from botocore.config import Config
from support.example_jobs import example_job
from support.fault_proxy import FaultProxy, fault_proxy
from support.moto_jobs import FAST, MotoJobs, aws_connection_env, hetero_request, moto_server
from support.task_logs import record_logs

from airflow_hetero.definition import naming
from airflow_hetero.hooks.training import HeteroTrainingHook, JobNameTakenError
from airflow_hetero.job.identity import IDENTITY_ENV, IDENTITY_TAG, TaskIdentity
from airflow_hetero.job.outcome import TrainingJobTimeoutError
from airflow_hetero.operators import HeteroTrainingOperator

CONN_ID = "faulty_aws"
JOB = example_job("exactly-once", max_run=7200)
#: botocore timeouts short enough that a held answer (6 s) times out, long enough that a slow
#: answer from moto on a busy CI machine does not (retries are the hook's business).
#: How long moto's reset may take to answer (a local server, on a loaded machine).
RESET_TIMEOUT = 30
TIMEOUTS = {"read_timeout": 5, "connect_timeout": 5, "retries": {"total_max_attempts": 1}}


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def proxy(server_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    urllib.request.urlopen(
        urllib.request.Request(f"{server_url}/moto-api/reset", method="POST"), timeout=RESET_TIMEOUT
    ).close()
    monkeypatch.setattr(HeteroTrainingHook, "default_retry_policy", FAST)
    with fault_proxy(server_url, hold_seconds=6.0) as p:
        name, value = aws_connection_env(CONN_ID, p.url)
        monkeypatch.setenv(name, value)
        yield p


@pytest.fixture
def jobs(proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> MotoJobs:
    """MotoJobs whose creates refuse an existing name with ResourceInUse, as SageMaker does."""
    from moto.sagemaker.exceptions import ResourceInUseException
    from moto.sagemaker.models import SageMakerModelBackend

    jobs = MotoJobs()
    jobs.install(monkeypatch)
    counted_create = SageMakerModelBackend.create_training_job

    def create(self: SageMakerModelBackend, training_job_name: str, *args: Any, **kwargs: Any) -> Any:
        if training_job_name in self.training_jobs:
            jobs.calls["CreateTrainingJob"] += 1
            raise ResourceInUseException(f"Training job {training_job_name} already exists")
        return counted_create(self, training_job_name, *args, **kwargs)

    monkeypatch.setattr(SageMakerModelBackend, "create_training_job", create)
    return jobs


def ti(run_id: str = "manual__2026-01-01", map_index: int = -1) -> MagicMock:
    return MagicMock(dag_id="retrain", task_id="train", run_id=run_id, map_index=map_index)


def operator(**kwargs: Any) -> HeteroTrainingOperator:
    kwargs.setdefault("job", JOB)
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("print_log", False)
    kwargs.setdefault("check_interval", 0.01)
    kwargs.setdefault("botocore_config", TIMEOUTS)
    kwargs.setdefault("wait_for_completion", False)
    return HeteroTrainingOperator(task_id="train", aws_conn_id=CONN_ID, **kwargs)


def name_for(run_id: str = "manual__2026-01-01", attempt: int = 0, map_index: int = -1) -> str:
    key = naming.task_key("exactly-once", "retrain", "train", run_id, map_index)
    return naming.derived_job_name("exactly-once", key, attempt)


def tags_of(server_url: str, name: str) -> dict[str, str]:
    client = boto3.client("sagemaker", region_name="us-east-1", endpoint_url=server_url)
    arn = client.describe_training_job(TrainingJobName=name)["TrainingJobArn"]
    return {t["Key"]: t["Value"] for t in client.list_tags(ResourceArn=arn)["Tags"]}


def foreign_job(server_url: str, name: str, status: str, jobs: MotoJobs) -> None:
    """A job named ``name`` that another task instance (or someone else) created."""
    client = boto3.client("sagemaker", region_name="us-east-1", endpoint_url=server_url)
    other = TaskIdentity("other_dag", "train", "scheduled__2025-01-01", 3)
    client.create_training_job(**other.stamp(hetero_request(name)))
    jobs.set(name, status, status)


# -- ambiguous creates ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["job", "request"])
@pytest.mark.parametrize("fault", ["reset_after", "500_after", "timeout_after"])
def test_lost_create_answer_adopts_the_job_instead_of_a_second_one(
    fault: str, mode: str, proxy: FaultProxy, jobs: MotoJobs
) -> None:
    proxy.fail("CreateTrainingJob", fault)
    # request mode: a request named like the definition's base, so both derive the same names
    op = operator() if mode == "job" else operator(job=None, request=hetero_request("exactly-once"))
    logged = record_logs(op)
    result = op.execute({"ti": ti()})
    assert result["training_job_name"] == name_for()
    assert proxy.sent["CreateTrainingJob"] == 1 and jobs.calls["CreateTrainingJob"] == 1
    assert jobs.names() == [name_for()]
    assert f"Adopted (the create's answer was lost) training job {name_for()}" in logged.text()


def test_without_the_hook_botocore_retries_send_the_create_twice(proxy: FaultProxy, jobs: MotoJobs) -> None:
    """Control: the same fault with botocore's own retries sends a second create, refused as in use."""
    proxy.fail("CreateTrainingJob", "500_after")
    client = boto3.client(
        "sagemaker", region_name="us-east-1", endpoint_url=proxy.url, config=Config(retries={"max_attempts": 2})
    )
    with pytest.raises(client.exceptions.ResourceInUse):
        client.create_training_job(**hetero_request("blind-retry"))
    assert jobs.calls["CreateTrainingJob"] == 2 and jobs.names() == ["blind-retry"]


def test_create_that_never_arrived_is_sent_again(proxy: FaultProxy, jobs: MotoJobs) -> None:
    proxy.fail("CreateTrainingJob", "reset_before")
    result = operator().execute({"ti": ti()})
    assert result["training_job_name"] == name_for()
    assert proxy.sent["CreateTrainingJob"] == 2 and jobs.calls["CreateTrainingJob"] == 1
    assert jobs.names() == [name_for()]


def test_every_job_carries_its_task_identity(proxy: FaultProxy, jobs: MotoJobs, server_url: str) -> None:
    operator().execute({"ti": ti(map_index=4)})
    name = name_for(map_index=4)
    tags = tags_of(server_url, name)
    identity = TaskIdentity("retrain", "train", "manual__2026-01-01", 4)
    assert tags["airflow-hetero:dag-id"] == "retrain" and tags["airflow-hetero:task-id"] == "train"
    assert tags["airflow-hetero:run-id"] == "manual__2026-01-01" and tags["airflow-hetero:map-index"] == "4"
    assert tags[IDENTITY_TAG] == identity.digest and len(identity.digest) == 64


def test_resource_in_use_by_another_task_instance_is_taken(proxy: FaultProxy, jobs: MotoJobs, server_url: str) -> None:
    """The name is free when looked up and taken when created (a race): JobNameTakenError, no adoption."""
    hook = HeteroTrainingHook(aws_conn_id=CONN_ID, config=TIMEOUTS)
    mine = TaskIdentity("retrain", "train", "manual__2026-01-01")
    hook.create_client.meta.events.register(
        "before-call.sagemaker.CreateTrainingJob", lambda **_: foreign_job(server_url, "raced", "InProgress", jobs)
    )  # foreign_job returns None: the create is still sent
    with pytest.raises(JobNameTakenError, match="raced"):
        hook.create_training_job(mine.stamp(hetero_request("raced")), identity=mine.digest)
    assert jobs.calls["CreateTrainingJob"] == 2 and jobs.names() == ["raced"]  # the other one's job only


def test_operator_moves_past_a_name_taken_in_a_race(proxy: FaultProxy, jobs: MotoJobs, server_url: str) -> None:
    op = operator()
    hook = op.make_hook()
    raced = [name_for()]

    def race(**_: Any) -> None:  # before our first create only: another task instance takes the name
        while raced:
            foreign_job(server_url, raced.pop(), "InProgress", jobs)

    hook.create_client.meta.events.register("before-call.sagemaker.CreateTrainingJob", race)
    op.make_hook = lambda: hook  # type: ignore[method-assign]
    logged = record_logs(op)
    result = op.execute({"ti": ti()})
    assert result["training_job_name"] == name_for(attempt=1)
    assert sorted(jobs.names()) == sorted([name_for(), name_for(attempt=1)])
    assert "taken by a job with another identity" in logged.text()


def test_a_name_race_runs_the_provider_steps_once(
    proxy: FaultProxy, jobs: MotoJobs, server_url: str, tmp_path: Path
) -> None:
    """The next candidate name after a race reuses the steps' role ARN: no second GetRole, bucket, upload."""
    trust = '{"Version": "2012-10-17", "Statement": []}'
    iam = boto3.client("iam", region_name="us-east-1", endpoint_url=server_url)
    role = iam.create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    (tmp_path / "train.csv").write_text("1,2\n")
    upload = {"Path": str(tmp_path / "train.csv"), "Bucket": "staging", "Key": "in/train.csv"}
    steps = {"S3CreateBucket": [{"Bucket": "staging"}], "S3Upload": [upload]}
    op = operator(job=None, request=hetero_request("exactly-once", RoleArn="SageMakerRole", S3Operations=steps))
    hook = op.make_hook()
    raced = [name_for()]

    def race(**_: Any) -> None:  # before our first create only: another task instance takes the name
        while raced:
            foreign_job(server_url, raced.pop(), "InProgress", jobs)

    hook.create_client.meta.events.register("before-call.sagemaker.CreateTrainingJob", race)
    puts: list[str] = []
    hook.s3_client.meta.events.register(
        "before-parameter-build.s3.PutObject", lambda params, **_: puts.append(params["Key"])
    )
    op.make_hook = lambda: hook  # type: ignore[method-assign]
    logged = record_logs(op)
    assert op.execute({"ti": ti()})["training_job_name"] == name_for(attempt=1)
    assert "taken by a job with another identity" in logged.text()
    assert puts == ["in/train.csv"]
    text = logged.text()
    assert text.count("role name SageMakerRole is") == 1 and text.count("S3Operations: bucket staging") == 1
    sagemaker = boto3.client("sagemaker", region_name="us-east-1", endpoint_url=server_url)
    assert sagemaker.describe_training_job(TrainingJobName=name_for(attempt=1))["RoleArn"] == role


def test_collision_with_another_task_instances_completed_job_trains_anew(
    proxy: FaultProxy, jobs: MotoJobs, server_url: str
) -> None:
    foreign_job(server_url, name_for(), "Completed", jobs)
    op = operator()
    logged = record_logs(op)
    result = op.execute({"ti": ti()})
    assert result["training_job_name"] == name_for(attempt=1) and result["status"] == "InProgress"
    assert sorted(jobs.names()) == sorted([name_for(), name_for(attempt=1)])
    assert "belongs to another task instance" in logged.text()


def test_retry_reattaches_only_to_its_own_identity(proxy: FaultProxy, jobs: MotoJobs) -> None:
    first = operator().execute({"ti": ti()})
    again = operator().execute({"ti": ti()})
    other_map_index = operator().execute({"ti": ti(map_index=0)})
    assert first["training_job_name"] == again["training_job_name"] == name_for()
    assert other_map_index["training_job_name"] == name_for(map_index=0)
    assert jobs.calls["CreateTrainingJob"] == 2


# -- clear, not-found, bounded waits ------------------------------------------------------------


def test_clear_while_running_retrains_under_the_next_name(proxy: FaultProxy, jobs: MotoJobs) -> None:
    """on_kill stops the job (Stopping); the re-run waits for Stopped, then submits the next name."""
    op = operator()
    op.execute({"ti": ti()})
    op.on_kill()
    assert jobs.job(name_for()).training_job_status == "Stopping"
    jobs.script(name_for(), {"status": "Stopping"}, {"status": "Stopped", "secondary": "Stopped"})
    rerun = operator(wait_for_completion=True)
    jobs.every_job = [{"status": "Completed", "secondary": "Completed"}]
    result = rerun.execute({"ti": ti()})
    assert result["training_job_name"] == name_for(attempt=1) and result["status"] == "Completed"
    assert jobs.calls["CreateTrainingJob"] == 2 and jobs.calls["StopTrainingJob"] == 1
    assert {jobs.job(n).training_job_status for n in jobs.names()} == {"Stopped", "Completed"}


def test_stuck_stopping_job_fails_with_its_name_and_state(proxy: FaultProxy, jobs: MotoJobs) -> None:
    op = operator()
    op.execute({"ti": ti()})
    op.on_kill()
    rerun = operator(wait_for_completion=True)
    rerun.stopping_timeout_seconds = 0.05
    with pytest.raises(TrainingJobTimeoutError, match=rf"{name_for()} is still Stopping after 0.05s"):
        rerun.execute({"ti": ti()})
    assert jobs.calls["CreateTrainingJob"] == 1


def test_not_found_right_after_our_create_is_transient(proxy: FaultProxy, jobs: MotoJobs) -> None:
    from moto.sagemaker.exceptions import ValidationError

    jobs.every_job = [ValidationError("Could not find training job"), {"status": "Completed", "secondary": "Completed"}]
    result = operator(wait_for_completion=True).execute({"ti": ti()})
    assert result["status"] == "Completed" and jobs.calls["CreateTrainingJob"] == 1


def test_not_found_right_after_create_without_waiting_is_transient(proxy: FaultProxy, jobs: MotoJobs) -> None:
    from moto.sagemaker.exceptions import ValidationError

    jobs.every_job = [ValidationError("Could not find training job"), ValidationError("Could not find training job")]
    result = operator(wait_for_completion=False).execute({"ti": ti()})
    assert result["status"] == "InProgress" and jobs.calls["CreateTrainingJob"] == 1


def test_not_found_long_after_create_is_an_error(proxy: FaultProxy, jobs: MotoJobs) -> None:
    from moto.sagemaker.exceptions import ValidationError

    jobs.every_job = [ValidationError("Could not find training job")]
    op = operator(wait_for_completion=True)
    op.not_found_grace_seconds = 0
    with pytest.raises(Exception, match="Could not find"):
        op.execute({"ti": ti()})


def test_identity_is_read_from_the_environment_when_describe_echoes_it() -> None:
    hook = HeteroTrainingHook(aws_conn_id=None, region_name="us-east-1")
    describe = {"TrainingJobArn": "arn:x", "Environment": {IDENTITY_ENV: "abc"}}
    assert hook.identity_of(describe) == "abc"  # no ListTags call (no client would answer it)


def test_too_many_user_tags_fail_before_any_job(proxy: FaultProxy, jobs: MotoJobs) -> None:
    from airflow_hetero._compat import AirflowFailException

    job = {**JOB, "tags": {f"k{i}": "v" for i in range(46)}}
    with pytest.raises(AirflowFailException, match="give at most 45"):
        operator(job=job).execute({"ti": ti()})
    assert jobs.calls["CreateTrainingJob"] == 0 and jobs.names() == []
