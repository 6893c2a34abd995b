"""Queue mode (``batch_queue=``): one service job, exactly once, its states logged, its outcome.

The operator's real code runs against botocore Stubbers of a Batch and a SageMaker client (each request and
answer checked against botocore's models; the calls in order). Faults: a lost submit answer, a refused
clientToken, a name taken by another task instance; a retry re-attaches; a kill terminates.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from support.example_jobs import example_job
from support.task_logs import record_logs

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero._compat import AirflowFailException, TaskDeferred
from airflow_hetero._retry import RetryPolicy
from airflow_hetero.definition import naming
from airflow_hetero.hooks.batch import HeteroBatchHook
from airflow_hetero.hooks.training import HeteroTrainingHook
from airflow_hetero.job.identity import IDENTITY_ENV, TaskIdentity
from airflow_hetero.job.outcome import TrainingJobFailedError
from airflow_hetero.operators import BatchQueue, HeteroTrainingOperator
from airflow_hetero.triggers.queue import HeteroQueuedTrainingTrigger, HeteroServiceJobTrigger

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.002)
RUN_ID = "manual__2026-01-01"
QUEUE_ARN = "arn:aws:batch:us-east-1:123456789012:job-queue/gpu-queue"
JOB = example_job("queued-retraining", max_run=7200)
IDENTITY = TaskIdentity("retrain", "train", RUN_ID)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def name_for(attempt: int = 0) -> str:
    names = naming.task_job_names("queued-retr", "retrain", "train", RUN_ID, -1, max_length=23)
    return list(names)[attempt]


def training_name(name: str, n: int = 1) -> str:
    return f"AWSBatch{name}{n:032x}"


def ti() -> MagicMock:
    return MagicMock(dag_id="retrain", task_id="train", run_id=RUN_ID, map_index=-1)


def operator(**kwargs: Any) -> HeteroTrainingOperator:
    kwargs.setdefault("job", JOB)
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("print_log", False)
    kwargs.setdefault("check_interval", 0.001)
    kwargs.setdefault("batch_queue", "gpu-queue")
    return HeteroTrainingOperator(task_id="train", aws_conn_id=None, region_name="us-east-1", **kwargs)


class Stubs:
    """The operator's two hooks, each on a stubbed client; what SubmitServiceJob was sent."""

    def __init__(self, op: HeteroTrainingOperator, monkeypatch: pytest.MonkeyPatch) -> None:
        self.batch = HeteroBatchHook(aws_conn_id=None, region_name="us-east-1", retry_policy=FAST)
        batch_client = boto3.client("batch", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
        self.batch.__dict__.update(conn=batch_client, submit_client=batch_client, _client=batch_client)
        self.sm = HeteroTrainingHook(aws_conn_id=None, region_name="us-east-1", retry_policy=FAST)
        sm_client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
        self.sm.__dict__.update(conn=sm_client, _client=sm_client)
        self.b = Stubber(batch_client)
        self.s = Stubber(sm_client)
        self.submitted: list[dict[str, Any]] = []
        batch_client.meta.events.register("provide-client-params.batch.SubmitServiceJob", self._capture)
        monkeypatch.setattr(op, "make_batch_hook", lambda: self.batch)
        monkeypatch.setattr(op, "make_hook", lambda: self.sm)

    def _capture(self, params: dict[str, Any], **_: Any) -> None:
        self.submitted.append(dict(params))

    def list_by_name(self, name: str, jobs: list[dict[str, Any]]) -> None:
        summaries = [
            {"jobId": j["jobId"], "jobName": j["jobName"], "serviceJobType": "SAGEMAKER_TRAINING", "createdAt": 1}
            for j in jobs
        ]
        self.b.add_response(
            "list_service_jobs",
            {"jobSummaryList": summaries},
            {"filters": [{"name": "JOB_NAME", "values": [name]}]},
        )
        for job in jobs:
            self.describe(job)

    def describe(self, job: dict[str, Any]) -> None:
        self.b.add_response("describe_service_job", job, {"jobId": job["jobId"]})

    def submit(self, name: str, job_id: str = "id-1") -> None:
        self.b.add_response(
            "submit_service_job",
            {"jobName": name, "jobId": job_id, "jobArn": f"arn:aws:batch:us-east-1:123456789012:job/{job_id}"},
            None,  # botocore validates them against the model; _capture keeps them
        )

    def submit_error(self, code: str, message: str, status: int) -> None:
        self.b.add_client_error("submit_service_job", code, message, http_status_code=status)

    def training(self, name: str, status: str = "Completed", asked: str | None = None, **extra: Any) -> None:
        answer = describe_training(name, status, **extra)
        self.s.add_response("describe_training_job", answer, {"TrainingJobName": asked or name})

    @property
    def payload(self) -> dict[str, Any]:
        return dict(json.loads(self.submitted[-1]["serviceRequestPayload"]))


def service_job(
    name: str,
    status: str,
    *,
    job_id: str = "id-1",
    attempts: int = 0,
    identity: str | None = IDENTITY.digest,
    **extra: Any,
) -> dict[str, Any]:
    job: dict[str, Any] = {
        "jobId": job_id,
        "jobName": name,
        "jobArn": f"arn:aws:batch:us-east-1:123456789012:job/{job_id}",
        "jobQueue": QUEUE_ARN,
        "serviceJobType": "SAGEMAKER_TRAINING",
        "status": status,
        "startedAt": 1767225600000,
        "createdAt": 1767225600000,
        **extra,
    }
    if identity is not None:
        job["tags"] = {"airflow-hetero:identity": identity}
    arns = [
        f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{training_name(name, n)}"
        for n in range(1, attempts + 1)
    ]
    if arns:
        job["attempts"] = [{"serviceResourceId": {"name": "TrainingJobArn", "value": a}} for a in arns]
        job["latestAttempt"] = {"serviceResourceId": {"name": "TrainingJobArn", "value": arns[-1]}}
    return job


def describe_training(name: str, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://bucket/output/{name}/output/model.tar.gz"},
        "TrainingJobStatus": status,
        "SecondaryStatus": {"Completed": "Completed", "Failed": "Failed", "InProgress": "Training"}[status],
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {
            "InstanceGroups": [
                {"InstanceGroupName": "data_group", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
                {"InstanceGroupName": "dnn_group", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 1},
            ],
            "VolumeSizeInGB": 30,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 7200},
        "CreationTime": NOW,
        "BillableTimeInSeconds": 100,
        **extra,
    }


@pytest.fixture
def stubs(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HeteroTrainingOperator, Stubs]]:
    op = operator()
    stubs = Stubs(op, monkeypatch)
    with stubs.b, stubs.s:
        yield op, stubs
    stubs.b.assert_no_pending_responses()
    stubs.s.assert_no_pending_responses()


def test_one_service_job_whose_payload_is_direct_modes_request_its_states_logged(
    stubs: tuple[HeteroTrainingOperator, Stubs],
) -> None:
    op, s = stubs
    name = name_for()
    attempt = training_name(name)
    s.list_by_name(name, [])
    s.submit(name)
    s.describe(service_job(name, "SUBMITTED"))
    s.describe(service_job(name, "RUNNABLE", statusReason="Waiting for capacity"))
    s.b.add_response(
        "get_job_queue_snapshot",
        {"frontOfQueue": {"jobs": [{"jobArn": "other"}, {"jobArn": "arn:aws:batch:us-east-1:123456789012:job/id-1"}]}},
        {"jobQueue": QUEUE_ARN},
    )
    s.describe(service_job(name, "SCHEDULED", attempts=1))
    s.training(attempt, "InProgress")
    s.describe(service_job(name, "SUCCEEDED", attempts=1))
    s.training(attempt, "Completed")
    s.training(attempt, "Completed")  # the outcome's
    logs = record_logs(op)
    context: Any = {"ti": ti()}
    result = op.execute(context)
    assert result["training_job_name"] == attempt
    assert result["service_job"]["job_id"] == "id-1"
    assert result["service_job"]["attempts"] == [attempt]
    assert result["service_job"]["billable_seconds"] == 100
    sent = s.submitted[-1]
    assert sent["jobQueue"] == "gpu-queue" and sent["jobName"] == name and len(sent["clientToken"]) <= 64
    assert sent["tags"]["airflow-hetero:identity"] == IDENTITY.digest
    payload = s.payload
    assert payload["TrainingJobName"] == name and len(name) <= 23
    assert payload["Environment"][IDENTITY_ENV] == IDENTITY.digest
    assert "Tags" not in payload  # moved to the service job, as the SDK v3 does
    assert payload["ResourceConfig"]["InstanceGroups"][1]["InstanceType"] == "ml.p3.2xlarge"
    text = logs.text()
    for line in (
        f"Service job {name}: SUBMITTED",
        f"Service job {name}: RUNNABLE (Waiting for capacity), place 2 in the queue",
        f"Service job {name}: SCHEDULED, training job {attempt}",
        f"attempt 1 is training job {attempt}",
        f"Service job {name}: SUCCEEDED",
    ):
        assert line in text
    context["ti"].xcom_push.assert_any_call(key="training_job_name", value=attempt)


def test_a_lost_submit_answer_adopts_the_job_it_created(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    name = name_for()
    s.list_by_name(name, [])
    s.submit_error("ServerException", "internal", 500)
    s.list_by_name(name, [service_job(name, "SUBMITTED")])
    s.describe(service_job(name, "SUBMITTED"))
    op.wait_for_completion = False
    logs = record_logs(op)
    result = op.execute({"ti": ti()})  # type: ignore[arg-type]
    assert result["service_job"]["job_id"] == "id-1"
    assert len(s.submitted) == 1  # never sent again
    assert "adopting it" in logs.text() or "Adopted" in logs.text()


def test_a_refused_client_token_adopts_the_first_job(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    name = name_for()
    s.list_by_name(name, [])
    s.submit_error("ClientException", "A job with clientToken abc was already submitted", 400)
    s.list_by_name(name, [service_job(name, "RUNNABLE")])
    s.describe(service_job(name, "RUNNABLE"))
    op.wait_for_completion = False
    assert op.execute({"ti": ti()})["status"] == "RUNNABLE"  # type: ignore[arg-type]
    assert len(s.submitted) == 1


def test_a_refusal_that_is_not_about_the_token_fails_without_a_lookup(
    stubs: tuple[HeteroTrainingOperator, Stubs],
) -> None:
    op, s = stubs
    name = name_for()
    s.list_by_name(name, [])
    s.submit_error("ClientException", "jobQueue gpu-queue does not exist", 400)
    with pytest.raises(ClientError, match="does not exist"):
        op.execute({"ti": ti()})  # type: ignore[arg-type]


def test_a_name_another_task_instance_holds_is_skipped(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    first, second = name_for(0), name_for(1)
    s.list_by_name(first, [service_job(first, "RUNNING", job_id="other", identity="someone-else")])
    s.list_by_name(second, [])
    s.submit(second, "id-2")
    s.describe(service_job(second, "SUBMITTED", job_id="id-2"))
    op.wait_for_completion = False
    logs = record_logs(op)
    assert op.execute({"ti": ti()})["service_job"]["job_name"] == second  # type: ignore[arg-type]
    assert "belongs to another task instance" in logs.text()


def test_a_retry_re_attaches_to_its_queued_job_and_a_failed_one_is_followed_by_the_next_name(
    stubs: tuple[HeteroTrainingOperator, Stubs],
) -> None:
    op, s = stubs
    first, second = name_for(0), name_for(1)
    s.list_by_name(first, [service_job(first, "FAILED", statusReason="earlier")])
    s.list_by_name(second, [service_job(second, "RUNNABLE", job_id="id-2")])
    op.wait_for_completion = False
    logs = record_logs(op)
    result = op.execute({"ti": ti()})  # type: ignore[arg-type]
    assert result["service_job"]["job_id"] == "id-2" and result["status"] == "RUNNABLE"
    assert not s.submitted
    assert f"Re-attaching to service job {second} (RUNNABLE)" in logs.text()
    assert op.run is not None and op.run.service_job_id == "id-2"


def test_failed_names_batchs_reason_and_sagemakers(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    name = name_for()
    attempt = training_name(name)
    s.list_by_name(name, [service_job(name, "RUNNING", attempts=1)])
    s.training(attempt, "InProgress")
    reason = "Received status from SageMaker: AlgorithmError: ExecuteUserScriptError"
    s.describe(service_job(name, "FAILED", attempts=1, statusReason=reason))
    failed = {"FailureReason": "AlgorithmError: ExecuteUserScriptError: exit 1"}
    s.training(attempt, "Failed", **failed)
    s.training(attempt, "Failed", **failed)
    with pytest.raises(TrainingJobFailedError) as err:
        op.execute({"ti": ti()})  # type: ignore[arg-type]
    assert reason in str(err.value)
    assert "ended Failed: AlgorithmError: ExecuteUserScriptError: exit 1" in str(err.value)


def test_a_new_attempt_is_logged_and_followed(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    name = name_for()
    s.list_by_name(name, [service_job(name, "RUNNING", attempts=1)])
    s.training(training_name(name, 1), "InProgress")
    s.describe(service_job(name, "RUNNABLE", attempts=1, statusReason="CapacityError"))
    s.b.add_response("get_job_queue_snapshot", {"frontOfQueue": {"jobs": []}}, {"jobQueue": QUEUE_ARN})
    s.describe(service_job(name, "RUNNING", attempts=2))
    s.training(training_name(name, 2), "InProgress")
    s.describe(service_job(name, "SUCCEEDED", attempts=2))
    s.training(training_name(name, 2), "Completed")
    s.training(training_name(name, 2), "Completed")
    s.training(training_name(name, 1), "Failed", FailureReason="CapacityError: no capacity", BillableTimeInSeconds=1)
    logs = record_logs(op)
    result = op.execute({"ti": ti()})  # type: ignore[arg-type]
    assert result["service_job"]["attempts"] == [training_name(name, 1), training_name(name, 2)]
    assert result["service_job"]["billable_seconds"] == 101  # summed over the attempts
    text = logs.text()
    assert "back in the queue: RUNNABLE (CapacityError), not in the first 100 of the queue" in text
    assert f"attempt 2 is training job {training_name(name, 2)}" in text


def test_on_kill_terminates_the_service_job(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    op.new_run({"ti": ti()}).service_job_id = "id-1"  # type: ignore[arg-type]
    s.b.add_response("terminate_service_job", {}, {"jobId": "id-1", "reason": "The Airflow task was killed"})
    op.on_kill()


def test_a_task_that_ends_while_queued_terminates_its_service_job(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    name = name_for()
    s.list_by_name(name, [service_job(name, "RUNNABLE")])
    s.b.add_response("terminate_service_job", {}, {"jobId": "id-1", "reason": "The Airflow task ended"})
    assert op.stop_own_job({"ti": ti()}) == name  # type: ignore[arg-type]


def test_deferred_the_queue_then_the_attempt_then_the_outcome(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    op.deferrable = True
    name = name_for()
    attempt = training_name(name)
    s.list_by_name(name, [])
    s.submit(name)
    s.describe(service_job(name, "SUBMITTED"))
    context: Any = {"ti": ti()}
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)
    trigger = deferred.value.trigger
    assert isinstance(trigger, HeteroServiceJobTrigger)
    path, kwargs = trigger.serialize()
    assert path == "airflow_hetero.triggers.queue.HeteroServiceJobTrigger"
    assert kwargs["job_queue"] == "gpu-queue" and kwargs["stop_on_kill"] is True
    assert deferred.value.method_name == "execute_queued_complete"
    # an attempt started: hand over to the training-job trigger
    s.describe(service_job(name, "RUNNING", attempts=1))
    s.training(attempt, "InProgress", asked=attempt.lower())  # as SageMaker spells it (an ARN's is lower-cased)
    event = {"status": "attempt", "service_job_id": "id-1", "training_job": attempt.lower()}
    resume = deferred.value.kwargs or {}
    with pytest.raises(TaskDeferred) as deferred:
        op.execute_queued_complete(context, event, **resume)
    trigger = deferred.value.trigger
    assert isinstance(trigger, HeteroQueuedTrainingTrigger) and trigger.job_name == attempt
    assert trigger.serialize()[1]["service_job_id"] == "id-1"
    # the training job ended: the service job decides
    s.describe(service_job(name, "SUCCEEDED", attempts=1))
    s.training(attempt, "Completed")
    s.training(attempt, "Completed")
    resume = deferred.value.kwargs or {}
    result = op.execute_queued_complete(context, {"status": "done", "job_name": attempt}, **resume)
    assert result["training_job_name"] == attempt and result["service_job"]["status"] == "SUCCEEDED"


def test_deferred_a_retried_attempt_goes_back_to_the_queue(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    op.deferrable = True
    name = name_for()
    attempt = training_name(name)
    s.describe(service_job(name, "RUNNABLE", attempts=1))
    s.training(attempt, "Failed", FailureReason="CapacityError: no capacity")
    with pytest.raises(TaskDeferred) as deferred:
        op.execute_queued_complete(
            {"ti": ti()},  # type: ignore[arg-type]
            {"status": "done", "job_name": attempt},
            service_job_id="id-1",
            stage="training",
        )
    trigger = deferred.value.trigger
    assert isinstance(trigger, HeteroServiceJobTrigger) and trigger.after_attempt == attempt


def test_a_trigger_error_terminates_and_fails(stubs: tuple[HeteroTrainingOperator, Stubs]) -> None:
    op, s = stubs
    s.b.add_response("terminate_service_job", {}, {"jobId": "id-1", "reason": ANY})
    with pytest.raises(AirflowFailException, match="AccessDenied"):
        op.execute_queued_complete(
            {"ti": ti()},  # type: ignore[arg-type]
            {"status": "error", "message": "AccessDenied"},
            service_job_id="id-1",
        )


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"fallback_instance_types": {"dnn_group": ["ml.p3.8xlarge"]}}, "Batch requeues a job that failed with"),
        (
            {
                "job": {
                    **JOB,
                    "instance_groups": [{**JOB["instance_groups"][0], "fallback_instance_types": ["ml.c5.2xlarge"]}],
                }
            },
            "fallback_instance_types cannot be used with batch_queue",
        ),
        ({"job_name": "a-name-far-too-long-for-batch"}, "at most 23 in a queue's payload"),
        ({"batch_queue": BatchQueue.__new__(BatchQueue)}, "batch_queue"),
        ({"batch_queue": 7}, "a job queue's name or ARN"),
    ],
)
def test_refused_at_dag_parse(kwargs: dict[str, Any], words: str) -> None:
    if isinstance(kwargs.get("batch_queue"), BatchQueue):
        kwargs["batch_queue"].__dict__.update(
            queue="q", share_identifier=None, scheduling_priority=12345, retry_strategy=None, attempt_timeout=None
        )
    with pytest.raises(ValueError, match=words):
        operator(**kwargs)


def test_a_payload_over_the_queues_limit_fails_before_anything_is_submitted(
    stubs: tuple[HeteroTrainingOperator, Stubs],
) -> None:
    op, s = stubs
    op.job = {**JOB, "hyperparameters": {f"k{i}": "x" * 300 for i in range(40)}}
    s.list_by_name(name_for(), [])
    with pytest.raises(AirflowFailException, match="at most 10240"):
        op.execute({"ti": ti()})  # type: ignore[arg-type]
    assert not s.submitted


def test_the_queue_is_templated() -> None:
    op = operator(
        batch_queue=BatchQueue("{{ params.queue }}", share_identifier="{{ params.team }}", scheduling_priority=5)
    )
    assert "batch_queue" in op.template_fields
    op.render_template_fields({"params": {"queue": "gpu-queue", "team": "teamA"}, "ti": ti()})  # type: ignore[arg-type]
    assert op.batch_queue is not None
    assert (op.batch_queue.queue, op.batch_queue.share_identifier) == ("gpu-queue", "teamA")


def test_a_job_its_queue_can_never_run_is_terminated_and_fails_naming_batchs_reason(
    stubs: tuple[HeteroTrainingOperator, Stubs],
) -> None:
    op, s = stubs
    name = name_for()
    reason = facts.BATCH_MISCONFIGURATION_REASON
    s.list_by_name(name, [service_job(name, "RUNNABLE", statusReason=reason)])
    s.b.add_response("get_job_queue_snapshot", {"frontOfQueue": {"jobs": []}}, {"jobQueue": QUEUE_ARN})
    s.b.add_response("terminate_service_job", {}, {"jobId": "id-1", "reason": reason})
    with pytest.raises(AirflowFailException) as err:
        op.execute({"ti": ti()})  # type: ignore[arg-type]
    assert str(err.value) == f"Service job {name} can never run in job queue {QUEUE_ARN}: {reason}; it was terminated"


def test_a_budget_counts_every_attempt_of_the_task_instances_earlier_service_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op = operator(max_cost=10, prices={"ml.c5.xlarge": 1.0, "ml.p3.2xlarge": 3.0}, use_pricing_api=False)
    s = Stubs(op, monkeypatch)
    first, second = name_for(0), name_for(1)
    with s.b, s.s:
        s.list_by_name(first, [service_job(first, "FAILED", attempts=1, statusReason="earlier")])
        s.training(training_name(first), "Failed", FailureReason="AlgorithmError", BillableTimeInSeconds=3600)
        s.list_by_name(second, [])
        s.submit(second)
        s.describe(service_job(second, "SUBMITTED"))
        op.wait_for_completion = False
        op.execute({"ti": ti()})  # type: ignore[arg-type]
    # 2 x 1.0 + 1 x 3.0 = 5.0 an hour: the earlier attempt's hour left 5.0 of 10, an hour less the stop window
    assert s.payload["StoppingCondition"]["MaxRuntimeInSeconds"] <= 3600


def test_a_refused_budget_runs_no_s3_operations_and_submits_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As in direct mode (test_budget_steps.py): the request's S3Operations wait until the budget let it through."""
    from support.moto_jobs import hetero_request

    (tmp_path / "train.csv").write_text("1,2\n")
    operations = {
        "S3CreateBucket": [{"Bucket": "staging-bucket"}],
        "S3Upload": [{"Path": str(tmp_path / "train.csv"), "Bucket": "staging-bucket", "Key": "in/train.csv"}],
    }
    request = hetero_request("queued-retraining", S3Operations=operations)
    op = operator(job=None, request=request, max_cost=0.01, prices={"ml.c5.xlarge": 1.0, "ml.p3.2xlarge": 3.0})
    s = Stubs(op, monkeypatch)
    written: list[str] = []
    for method in ("ensure_bucket", "upload_path", "upload_bytes"):
        monkeypatch.setattr(s.sm, method, lambda *a, _m=method, **k: written.append(_m))
    with s.b, s.s:
        s.list_by_name(name_for(0), [])
        with pytest.raises(AirflowFailException, match=r"^Task train: budget: max_cost 0.01 USD.*nothing was submit"):
            op.execute({"ti": ti()})  # type: ignore[arg-type]
    assert written == [] and s.submitted == []
