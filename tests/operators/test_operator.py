"""HeteroTrainingOperator against moto: request shape, waiting, outcomes, retries, on_kill, templating."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
from support.example_jobs import example_job
from support.moto_jobs import FAST, ROLE, MotoJobs, hetero_request, mocked_jobs, put_logs, throttling, toolkit_startup
from support.task_logs import record_logs

from airflow_hetero._compat import AIRFLOW_V_3, AirflowFailException, TaskDeferred
from airflow_hetero.definition import naming
from airflow_hetero.job.outcome import TrainingJobFailedError, TrainingJobStoppedError, TrainingJobTimeoutError
from airflow_hetero.links.training import training_job_url
from airflow_hetero.operators import HeteroTrainingOperator
from airflow_hetero.operators.training import JOB_NAME_XCOM_KEY
from airflow_hetero.triggers.training import HeteroTrainingTrigger
from airflow_hetero.xcom_keys import LINKS_XCOM_KEY as XCOM_KEY

JOB = example_job(
    "hetero-test",
    role=ROLE,
    inputs={"train": {"s3_data": "s3://bucket/train", "instance_groups": ["data_group"]}},
    hyperparameters={"epochs": 2},
    max_run=7200,
)


class WorkerDied(BaseException):
    """Stands in for a worker that disappears mid-wait (not an Exception: nothing catches it)."""


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    with mocked_jobs(monkeypatch) as jobs:
        yield jobs


def context(run_id: str = "manual__2026-01-01", map_index: int = -1) -> dict[str, Any]:
    ti = MagicMock(dag_id="retrain", task_id="train", run_id=run_id, map_index=map_index)
    return {"ti": ti, "run_id": run_id}


def operator(**kwargs: Any) -> HeteroTrainingOperator:
    kwargs.setdefault("job", JOB)
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("print_log", False)
    kwargs.setdefault("check_interval", 0.01)
    return HeteroTrainingOperator(task_id="train", aws_conn_id=None, **kwargs)


def request_mode(**kwargs: Any) -> HeteroTrainingOperator:
    """``operator()`` given JOB's request (named like its base, so both derive the same names)."""
    request = hetero_request("hetero-test", StoppingCondition={"MaxRuntimeInSeconds": JOB["max_run"]})
    return operator(job=None, request=request, **kwargs)


def expected_name(run_id: str = "manual__2026-01-01", attempt: int = 0) -> str:
    key = naming.task_key("hetero-test", "retrain", "train", run_id, -1)
    return naming.derived_job_name("hetero-test", key, attempt)


def test_submits_the_heterogeneous_request_and_returns_without_waiting(jobs: MotoJobs) -> None:
    ctx = context()
    result = operator(wait_for_completion=False).execute(ctx)
    name = expected_name()
    assert jobs.names() == [name]
    assert result["training_job_name"] == name and result["status"] == "InProgress"
    assert result["instance_groups"] == [
        {"name": "data_group", "type": "ml.c5.xlarge", "count": 2},
        {"name": "dnn_group", "type": "ml.p3.2xlarge", "count": 1},
    ]
    described = boto3.client("sagemaker", region_name="us-east-1").describe_training_job(TrainingJobName=name)
    assert [g["InstanceGroupName"] for g in described["ResourceConfig"]["InstanceGroups"]] == [
        "data_group",
        "dnn_group",
    ]
    assert "InstanceCount" not in described["ResourceConfig"]
    assert described["InputDataConfig"][0]["DataSource"]["S3DataSource"]["InstanceGroupNames"] == ["data_group"]
    assert described["HyperParameters"]["sagemaker_job_name"] == f'"{name}"'
    pushed = {c.kwargs["key"]: c.kwargs["value"] for c in ctx["ti"].xcom_push.call_args_list}
    assert pushed[XCOM_KEY] == {"job_name": name, "region": "us-east-1"}
    assert pushed[JOB_NAME_XCOM_KEY] == name  # for a summary of the job whatever the task's ending
    if AIRFLOW_V_3:  # Airflow 3 reads the URL from the link's XCom; 2.11 calls get_link instead
        assert pushed["_link_SageMakerTrainingJobLink"] == training_job_url("us-east-1", name)
    else:
        assert set(pushed) == {XCOM_KEY, JOB_NAME_XCOM_KEY}


def test_waits_logging_each_transition_once_with_one_describe_per_check(jobs: MotoJobs) -> None:
    name = expected_name()
    op = operator()
    logged = record_logs(op)
    steps = [
        {"status": "InProgress", "secondary": "Starting"},
        {"status": "InProgress", "secondary": "Downloading", "message": "Downloading input data"},
        {"status": "InProgress", "secondary": "Downloading", "message": "Downloading input data"},
        {"status": "InProgress", "secondary": "Training", "message": "Training image download completed."},
        {"status": "InProgress", "secondary": "Uploading", "message": "Uploading generated training model"},
        {"status": "Completed", "secondary": "Completed", "message": "Training job completed"},
    ]
    jobs.script(name, *steps)
    result = op.execute(context())
    assert result["status"] == "Completed" and result["secondary_status"] == "Completed"
    assert jobs.calls["DescribeTrainingJob"] == len(steps) + 1  # + the find-by-name before submitting
    text = logged.text()
    for secondary, message in [
        ("Downloading", "Downloading input data"),
        ("Training", "Training image download completed."),
        ("Uploading", "Uploading generated training model"),
        ("Completed", "Training job completed"),
    ]:
        assert text.count(f"{name}: {secondary} - {message}") == 1


def test_failed_job_fails_the_task_with_its_reason(jobs: MotoJobs) -> None:
    name = expected_name()
    reason = "AlgorithmError: ExecuteUserScriptError: Command 'python train.py' exit status 1"
    jobs.script(name, {"status": "Failed", "secondary": "Failed", "failure_reason": reason})
    with pytest.raises(TrainingJobFailedError) as info:
        operator().execute(context())
    assert reason in str(info.value) and name in str(info.value)


def test_stopped_fails_by_default_and_passes_when_allowed(jobs: MotoJobs) -> None:
    jobs.script(expected_name("r1"), {"status": "Stopped", "secondary": "Stopped"})
    with pytest.raises(TrainingJobStoppedError):
        operator().execute(context("r1"))
    jobs.script(expected_name("r2"), {"status": "Stopped", "secondary": "Stopped"})
    assert operator(fail_on_stopped=False).execute(context("r2"))["status"] == "Stopped"


def test_throttling_bursts_while_polling_are_survived(jobs: MotoJobs) -> None:
    name = expected_name()
    burst = [throttling() for _ in range(FAST.max_attempts * 2 + 1)]  # beyond two polls' retry budgets
    jobs.script(name, {"status": "InProgress", "secondary": "Training"}, *burst, {"status": "Completed"})
    assert operator().execute(context())["status"] == "Completed"
    assert jobs.calls["CreateTrainingJob"] == 1


def die_on_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    def sleep(_: float) -> None:
        raise WorkerDied

    monkeypatch.setattr("airflow_hetero.operators.sync_wait.time.sleep", sleep)  # the wait loop's sleep


def test_retry_while_the_job_runs_reattaches_one_job_in_total(jobs: MotoJobs, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:
        die_on_sleep(m)
        with pytest.raises(WorkerDied):
            operator().execute(context())
    assert jobs.calls["CreateTrainingJob"] == 1
    name = expected_name()
    jobs.script(name, {"status": "InProgress", "secondary": "Training"}, {"status": "Completed"})
    retry = operator()
    logged = record_logs(retry)
    assert retry.execute(context())["training_job_name"] == name
    assert jobs.calls["CreateTrainingJob"] == 1 and jobs.names() == [name]
    assert f"Re-attaching to training job {name}" in logged.text()


def test_retry_after_a_failed_job_submits_a_new_one(jobs: MotoJobs) -> None:
    first = expected_name()
    jobs.script(first, {"status": "Failed", "failure_reason": "CapacityError: not enough capacity"})
    with pytest.raises(TrainingJobFailedError, match="CapacityError"):
        operator().execute(context())
    second = expected_name(attempt=1)
    jobs.script(second, {"status": "Completed"})
    assert operator().execute(context())["training_job_name"] == second
    assert jobs.calls["CreateTrainingJob"] == 2 and jobs.names() == [first, second]


def test_retry_after_a_completed_job_returns_it_without_a_new_job(jobs: MotoJobs) -> None:
    operator(wait_for_completion=False).execute(context())
    jobs.set(expected_name(), "Completed", "Completed", BillableTimeInSeconds=42)
    result = operator().execute(context())
    assert result["billable_seconds"] == 42
    assert jobs.calls["CreateTrainingJob"] == 1


def test_on_existing_job_fail_and_new(jobs: MotoJobs) -> None:
    operator(wait_for_completion=False).execute(context())
    with pytest.raises(AirflowFailException, match="on_existing_job='fail'"):
        operator(on_existing_job="fail").execute(context())
    result = operator(on_existing_job="new", wait_for_completion=False).execute(context())
    assert result["training_job_name"] == expected_name(attempt=1)
    assert jobs.calls["CreateTrainingJob"] == 2
    with pytest.raises(ValueError, match="on_existing_job"):
        operator(on_existing_job="sometimes")


def test_explicit_job_name_and_its_fresh_suffix(jobs: MotoJobs) -> None:
    jobs.script("nightly-2026-01-01", {"status": "Failed", "failure_reason": "boom"})
    with pytest.raises(TrainingJobFailedError):
        operator(job_name="nightly-2026-01-01").execute(context())
    jobs.script("nightly-2026-01-01-1", {"status": "Completed"})
    assert operator(job_name="nightly-2026-01-01").execute(context())["training_job_name"] == "nightly-2026-01-01-1"
    with pytest.raises(AirflowFailException, match="job_name: 'bad_name' may contain only"):
        operator(job_name="bad_name").execute(context())


def test_explicit_job_name_too_long_for_its_retry_suffix_fails_before_any_job(jobs: MotoJobs) -> None:
    name = "n" * 62  # valid alone, but "-99" would make it 65 characters
    with pytest.raises(
        AirflowFailException,
        match=r"job_name: 'n{62}-99' is 65 characters; SageMaker allows 1 to 63 \(retries append up to -99\)",
    ):
        operator(job_name=name).execute(context())
    assert jobs.calls["CreateTrainingJob"] == 0


def test_on_kill_stops_the_job_the_task_started(jobs: MotoJobs, monkeypatch: pytest.MonkeyPatch) -> None:
    op = operator()
    op.on_kill()  # nothing started yet: nothing to stop
    assert jobs.calls["StopTrainingJob"] == 0
    with monkeypatch.context() as m:
        die_on_sleep(m)
        with pytest.raises(WorkerDied):
            op.execute(context())
    op.on_kill()
    assert jobs.calls["StopTrainingJob"] == 1
    assert jobs.job(expected_name()).training_job_status == "Stopping"


def test_on_kill_stops_a_reattached_job(jobs: MotoJobs, monkeypatch: pytest.MonkeyPatch) -> None:
    operator(wait_for_completion=False).execute(context())
    op = operator()
    with monkeypatch.context() as m:
        die_on_sleep(m)
        with pytest.raises(WorkerDied):
            op.execute(context())
    op.on_kill()
    assert jobs.job(expected_name()).training_job_status == "Stopping"
    assert jobs.calls["CreateTrainingJob"] == 1


def test_on_kill_stops_through_the_waits_client_before_it_logs(jobs: MotoJobs, monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow 3 calls on_kill in the task's SIGTERM handler, where a log call can block for ever (the
    interrupted log write holds its lock; seen by tests/system: the job kept running). So the stop goes
    out first, through the wait's own client: no new hook (building one logs), no log line before it."""
    op = operator()
    with monkeypatch.context() as m:
        die_on_sleep(m)
        with pytest.raises(WorkerDied):
            op.execute(context())
    seen: list[tuple[str, int]] = []
    monkeypatch.setattr(type(op), "make_hook", lambda self: seen.append(("new hook", 0)) or pytest.fail("new hook"))
    monkeypatch.setattr(op.log, "info", lambda *args, **kwargs: seen.append(("log", jobs.calls["StopTrainingJob"])))
    op.on_kill()
    assert jobs.calls["StopTrainingJob"] == 1
    assert seen == [("log", 1)]  # one line, after the stop
    assert jobs.job(expected_name()).training_job_status == "Stopping"


def test_max_ingestion_time_stops_then_fails(jobs: MotoJobs) -> None:
    with pytest.raises(TrainingJobTimeoutError, match="max_ingestion_time"):
        operator(max_ingestion_time=0.05).execute(context())
    assert jobs.calls["StopTrainingJob"] == 1
    assert jobs.job(expected_name()).training_job_status == "Stopping"


def test_every_string_in_the_definition_is_templated(jobs: MotoJobs) -> None:
    job = {
        **JOB,
        "inputs": {"train": {"s3_data": "s3://bucket/train/{{ run_id }}/", "instance_groups": ["data_group"]}},
        "hyperparameters": {"run": "{{ run_id }}", "epochs": 2},
    }
    op = operator(job=job, job_name="job-{{ run_id | replace('_', '-') }}", wait_for_completion=False)
    ctx = context("scheduled__2026")
    op.render_template_fields(ctx)  # type: ignore[arg-type]
    result = op.execute(ctx)
    assert result["training_job_name"] == "job-scheduled--2026"
    described = jobs.backend.describe_training_job("job-scheduled--2026")
    assert (
        described["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://bucket/train/scheduled__2026/"
    )
    assert described["HyperParameters"]["run"] == '"scheduled__2026"'


def test_invalid_definition_without_templates_fails_at_dag_parse_time() -> None:
    from airflow_hetero.definition.errors import JobDefinitionError

    bad = {**JOB, "instance_groups": [{**JOB["instance_groups"][0], "instance_count": 0}]}
    with pytest.raises(JobDefinitionError, match=r"instance_groups\[0\]\.instance_count: must be at least 1"):
        operator(job=bad)
    templated = {**JOB, "instance_groups": [{**JOB["instance_groups"][0], "instance_type": "{{ params.t }}"}]}
    assert operator(job=templated).job == templated  # checked once rendered, at run time


def test_invalid_definition_after_rendering_fails_without_retry(jobs: MotoJobs) -> None:
    job = {**JOB, "instance_groups": [{**JOB["instance_groups"][0], "instance_type": "{{ run_id }}"}]}
    op = operator(job=job)
    ctx = context("ml.bogus")
    with pytest.raises(AirflowFailException, match=r"instance_groups\[0\]\.instance_type"):
        op.render_template_fields(ctx)  # type: ignore[arg-type]  # checked as soon as it is rendered
    with pytest.raises(AirflowFailException, match=r"instance_groups\[0\]\.instance_type"):
        op.execute(ctx)
    assert jobs.calls["CreateTrainingJob"] == 0


def dag_operator(tmp_path: Path, **kwargs: Any) -> HeteroTrainingOperator:
    from airflow.providers.common.compat.sdk import DAG

    with DAG("retrain", schedule=None) as dag:
        op = operator(**kwargs)
    dag.fileloc = str(tmp_path / "dag.py")
    return op


def test_yaml_file_relative_to_the_dag_file_is_templated(jobs: MotoJobs, tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.yaml").write_text(
        f"""
role: {ROLE}
image_uri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/hetero-train:latest
entry_point: train.py
source_dir: s3://code/src/sourcedir.tar.gz
output_path: "s3://bucket/output/{{{{ run_id }}}}"
base_job_name: hetero-test
instance_groups:
  - {{instance_group_name: data_group, instance_type: ml.c5.xlarge, instance_count: 2}}
  - {{instance_group_name: dnn_group, instance_type: ml.p3.2xlarge, instance_count: 1}}
inputs:
  train: {{s3_data: s3://bucket/train, instance_groups: [data_group]}}
"""
    )
    op = dag_operator(tmp_path, job="jobs/train.yaml", wait_for_completion=False)
    ctx = context("r7")
    op.render_template_fields(ctx)  # type: ignore[arg-type]
    name = op.execute(ctx)["training_job_name"]
    assert jobs.backend.describe_training_job(name)["OutputDataConfig"]["S3OutputPath"] == "s3://bucket/output/r7"


def test_missing_definition_file_fails_clearly(jobs: MotoJobs, tmp_path: Path) -> None:
    op = dag_operator(tmp_path, job="jobs/nope.yaml")
    with pytest.raises(AirflowFailException, match="file not found"):
        op.execute(context())


def test_local_source_dir_is_packaged_and_uploaded_before_submission(jobs: MotoJobs, tmp_path: Path) -> None:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bucket")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('hello')\n")
    op = dag_operator(tmp_path, job={**JOB, "source_dir": "code"}, wait_for_completion=False)
    name = op.execute(context())["training_job_name"]
    uri = f"s3://bucket/{name}/source/sourcedir.tar.gz"
    described = jobs.backend.describe_training_job(name)
    assert described["HyperParameters"]["sagemaker_submit_directory"] == f'"{uri}"'
    body = (
        boto3.client("s3", region_name="us-east-1").get_object(Bucket="bucket", Key=uri.split("/", 3)[3])["Body"].read()
    )
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        assert tar.extractfile("train.py").read() == b"print('hello')\n"  # type: ignore[union-attr]


def test_missing_source_dir_fails_before_any_job(jobs: MotoJobs, tmp_path: Path) -> None:
    op = dag_operator(tmp_path, job={**JOB, "source_dir": "missing"})
    with pytest.raises(AirflowFailException, match="source_dir"):
        op.execute(context())
    assert jobs.calls["CreateTrainingJob"] == 0


@pytest.mark.parametrize("mode", ["job", "request"])
def test_print_log_streams_every_host_with_its_group(mode: str, jobs: MotoJobs) -> None:
    name = expected_name()
    logs = boto3.client("logs", region_name="us-east-1")

    def write_logs() -> None:
        put_logs(logs, name, "algo-1", [*toolkit_startup("algo-1", "dnn_group"), "epoch 1 loss 0.4"])
        put_logs(logs, name, "algo-2", [*toolkit_startup("algo-2", "data_group"), "served 10 batches"])

    jobs.script(name, {"status": "InProgress", "secondary": "Training"}, {"status": "Completed"})
    op = (
        operator(print_log=True)
        if mode == "job"
        else operator(job=None, request=hetero_request("hetero-test"), print_log=True)
    )
    logged = record_logs(op)
    original = jobs.scripts[name][0]
    jobs.scripts[name][0] = lambda: (original(), write_logs())  # type: ignore[func-returns-value]
    op.execute(context())
    lines = logged.lines
    assert lines.count("[dnn_group/algo-1] epoch 1 loss 0.4") == 1
    assert lines.count("[data_group/algo-2] served 10 batches") == 1


@pytest.mark.parametrize("make", [operator, request_mode], ids=["job", "request"])
def test_deferrable_defers_to_a_trigger_that_owns_the_job(make: Any, jobs: MotoJobs) -> None:
    op = make(deferrable=True)
    with pytest.raises(TaskDeferred) as info:
        op.execute(context())
    trigger = info.value.trigger
    assert isinstance(trigger, HeteroTrainingTrigger)
    assert trigger.job_name == expected_name() and trigger.stop_on_kill is True
    # counted from the task's start: the job's MaxRuntime (7200 s) + margin, not a hidden cap
    assert trigger.deadline == pytest.approx(time.time() + 7200 + 3600, abs=30)
    with pytest.raises(TaskDeferred) as info:
        make(deferrable=True, max_ingestion_time=600).execute(context())
    assert info.value.trigger.deadline == pytest.approx(time.time() + 600, abs=30)
    assert jobs.calls["CreateTrainingJob"] == 1  # the second task instance re-attached


def test_execute_complete_gives_the_same_result_as_the_sync_path(jobs: MotoJobs) -> None:
    operator(wait_for_completion=False).execute(context())
    name = expected_name()
    jobs.set(name, "Completed", "Completed")
    resumed = operator().execute_complete(context(), {"status": "done", "job_name": name})
    assert resumed == operator().execute(context())


def test_execute_complete_timeout_stops_the_job(jobs: MotoJobs) -> None:
    operator(wait_for_completion=False).execute(context())
    name = expected_name()
    with pytest.raises(TrainingJobTimeoutError, match="max_ingestion_time"):
        operator(max_ingestion_time=60).execute_complete(context(), {"status": "timeout", "job_name": name})
    assert jobs.job(name).training_job_status == "Stopping"


def test_verify_and_botocore_config_reach_hook_and_trigger(jobs: MotoJobs) -> None:
    config = {"retries": {"mode": "standard", "max_attempts": 7}, "connect_timeout": 5}
    op = operator(deferrable=True, verify=False, botocore_config=config)
    hook = op.make_hook()
    assert hook.verify is False and hook.config.connect_timeout == 5
    assert hook.conn.meta.config.retries["total_max_attempts"] == 8  # 7 retries + the first call
    with pytest.raises(TaskDeferred) as info:
        op.execute(context())
    assert (info.value.trigger.verify, info.value.trigger.botocore_config) == (False, config)


def test_a_long_outage_fails_the_task_without_stopping_the_job(jobs: MotoJobs) -> None:
    from botocore.exceptions import ClientError

    name = expected_name()
    jobs.script(name, {"status": "InProgress", "secondary": "Training"}, *[throttling() for _ in range(200)])
    op = operator()
    op.transient_grace_seconds = 0.2
    with pytest.raises(ClientError, match="Throttling"):
        op.execute(context())
    assert jobs.calls["StopTrainingJob"] == 0
    jobs.scripts[name] = []  # the outage is over: the retry re-attaches
    jobs.set(name, "Completed", "Completed")
    assert operator().execute(context())["training_job_name"] == name
    assert jobs.calls["CreateTrainingJob"] == 1


def test_log_streams_are_listed_only_when_new_ones_may_exist(jobs: MotoJobs, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_hetero.logs.tail import LogTailer

    listings: list[int] = []
    original = LogTailer._list_streams

    def counting(self: LogTailer) -> None:
        listings.append(len(self.streams))
        original(self)

    monkeypatch.setattr(LogTailer, "_list_streams", counting)
    name = expected_name()
    logs = boto3.client("logs", region_name="us-east-1")

    def all_hosts_log() -> None:
        jobs.set(name, "InProgress", "Training", "Training in progress")
        for host, group in (("algo-1", "dnn_group"), ("algo-2", "data_group"), ("algo-3", "data_group")):
            put_logs(logs, name, host, toolkit_startup(host, group))

    steady = {"status": "InProgress", "secondary": "Training"}
    jobs.script(name, {"status": "InProgress", "secondary": "Downloading"}, steady, steady, steady, steady)
    jobs.scripts[name].insert(1, all_hosts_log)
    jobs.scripts[name].append(lambda: jobs.set(name, "InProgress", "Uploading", "Uploading model"))
    jobs.scripts[name].append(lambda: jobs.set(name, "Completed", "Completed"))
    operator(print_log=True).execute(context())
    # polls: Downloading (list: nothing yet), Training + 3 hosts (transition: list), 4 steady polls
    # with every host known (no listing), Uploading (transition: list), Completed (final listing)
    assert len(listings) == 4
    assert listings[-2:] == [3, 3]


def test_every_request_sent_went_through_the_pipeline_once(jobs: MotoJobs, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline is the one path to the create: a step added to it sees the request that is sent, once."""
    from dataclasses import replace

    from airflow_hetero.operators import direct_run, pipeline

    seen: list[str] = []

    class Mark:
        def __init__(self, at: pipeline.StepContext) -> None:
            self.at = at

        def apply(self, draft: pipeline.Draft) -> pipeline.Draft:
            seen.append(draft.name)
            tags = [*draft.request["Tags"], {"Key": "marked", "Value": "y"}]
            return replace(draft, request={**draft.request, "Tags": tags})

    marked = pipeline.Pipeline(job=pipeline.DIRECT.job, named=pipeline.DIRECT.named, send=(*pipeline.DIRECT.send, Mark))
    monkeypatch.setattr(direct_run, "DIRECT", marked)
    name = expected_name()
    steps = [{"status": "InProgress", "secondary": "Training"}, {"status": "Completed", "secondary": "Completed"}]
    jobs.script(name, *steps)
    result = operator(print_log=False, check_interval=0.01).execute(context())
    assert result["status"] == "Completed"
    assert seen == [name]
    assert jobs.calls["CreateTrainingJob"] == 1
    assert {"Key": "marked", "Value": "y"} in jobs.job(name).tags


def test_the_not_found_grace_of_the_operator_reaches_its_trigger(jobs: MotoJobs) -> None:
    op = operator(deferrable=True)
    op.not_found_grace_seconds = 5
    with pytest.raises(TaskDeferred) as info:
        op.execute(context())
    trigger = info.value.trigger
    assert trigger.not_found_grace_seconds == 5
    _, kwargs = trigger.serialize()
    assert kwargs["not_found_grace_seconds"] == 5
    assert HeteroTrainingTrigger(**kwargs).not_found_grace_seconds == 5
    assert HeteroTrainingOperator.not_found_grace_seconds is None  # the one default, in job.waiting
    assert HeteroTrainingTrigger("old").not_found_grace_seconds is None
    # unset, it is not written: a triggerer of the previous release loads the trigger as before
    assert "not_found_grace_seconds" not in HeteroTrainingTrigger("old").serialize()[1]


def test_a_role_name_is_expanded_with_iam_when_the_job_is_submitted(jobs: MotoJobs) -> None:
    """As the SDK's expand_role: a role without '/' is a name, looked up with IAM GetRole."""
    with pytest.raises(AirflowFailException, match="role: IAM has no role named 'SageMakerRole'"):
        operator(job={**JOB, "role": "SageMakerRole"}, wait_for_completion=False).execute(context("r1"))
    assert jobs.names() == []
    trust = '{"Version": "2012-10-17", "Statement": []}'
    arn = boto3.client("iam").create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    op = operator(job={**JOB, "role": "SageMakerRole"}, wait_for_completion=False)
    logged = record_logs(op)
    name = op.execute(context("r2"))["training_job_name"]
    described = boto3.client("sagemaker", region_name="us-east-1").describe_training_job(TrainingJobName=name)
    assert described["RoleArn"] == arn
    assert f"role: role name SageMakerRole is {arn}" in logged.text()
