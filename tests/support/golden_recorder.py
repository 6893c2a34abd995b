"""Record what the training operator sends to AWS and pushes to XCom, for the goldens of ``tests/golden``.

The operator runs its real code against :class:`FakeAws`, a small stateful stand-in for SageMaker, AWS Batch and
CloudWatch Logs that answers at botocore's ``before-call`` event: no request leaves the process. Every client a
hook creates (``botocore.session.Session.create_client`` is wrapped; one client per service, region and endpoint
is built for the whole session, as building one costs more than a case) records each request at
``before-parameter-build``, as the operator passed it. botocore's own client-side validation then runs as for a
real call, the stand-in refuses what the service's constraints refuse (:mod:`support.service_model`, a Batch
payload checked as Batch's CreateTrainingJob would be) and every answer is checked against the operation's
output shape (a misfit fails the case: a bug of the stand-in).

The stand-in's clock is ``time.sleep`` (of the test's thread): each sleep of the task, between its polls, is one
tick that moves every running job one step along its script (:class:`Step`, :class:`ServiceStep`). A deferral's
trigger is not run against AWS: its own ``_wait`` is fed the stand-in's description at each poll, ticking between
polls, until it decides; its event resumes a new task object (as a resumed task is), through ``resume_execution``.

:func:`normalised` turns a recording into plain JSON: times near the recording's clock become ``<epoch>`` (or
``<epoch-ms>``, ``<datetime>``), a service job's ``queued_seconds`` (a wall-clock wait) ``<seconds>``, a
trigger's ``deadline`` is said relative to its ``started_at``, a Batch
``serviceRequestPayload`` is shown parsed, mappings sorted by key. :func:`json_diff` words a difference.
"""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import botocore.session
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, ParamValidationError, ReadTimeoutError

from support.service_model import check_answer, check_request, service_refusal

ACCOUNT = "123456789012"
REGION = "us-east-1"
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
#: Ticks (sleeps of the task) after which a case counts as a runaway wait and fails.
MAX_TICKS = 200
#: A trigger's wait: at most this many ticks of the stand-in before its event must be due.
MAX_TRIGGER_TICKS = 50
#: Deferrals of one try after which the recording stops (and says so in the golden).
MAX_DEFERRALS = 6
#: Values this close to the recording's clock are times, masked by :func:`normalised`.
NEAR = 40 * 86400.0
CAPACITY_ERROR = (
    "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
)
BATCH_REASON_PREFIX = "Received status from SageMaker: "


class WorkerDied(BaseException):
    """The worker running the task disappears (not an Exception: nothing in the task catches it)."""


# -- scripts: how the stand-in's jobs move on --------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """A training job's state after one tick: TrainingJobStatus, SecondaryStatus, its message, FailureReason."""

    status: str
    secondary: str
    message: str = ""
    failure_reason: str | None = None


TRAINING = Step("InProgress", "Training", "Training image download completed. Training in progress.")
COMPLETED = Step("Completed", "Completed", "Training job completed")
#: A job that trains and completes (the default of every training job without a script of its own).
RUNS = (TRAINING, COMPLETED)
#: A job SageMaker cannot place.
NO_CAPACITY = (Step("Failed", "Failed", CAPACITY_ERROR, CAPACITY_ERROR),)
MAX_RUNTIME_EXCEEDED = Step(
    "Stopped", "MaxRuntimeExceeded", "Training job runtime exceeded MaxRuntimeInSeconds provided"
)
#: A job SageMaker stops at its MaxRuntimeInSeconds.
CAPPED = (TRAINING, MAX_RUNTIME_EXCEEDED)


@dataclass(frozen=True)
class ServiceStep:
    """A service job's state after one tick; ``new_attempt`` starts an attempt (its training job created from
    the payload, as Batch names it), ``training`` moves the latest attempt's training job."""

    status: str
    reason: str | None = None
    new_attempt: bool = False
    training: Step | None = None


#: A service job that waits in the queue, gets an attempt that trains and succeeds.
QUEUED_RUN = (
    ServiceStep("RUNNABLE", "Waiting for capacity"),
    ServiceStep("SCHEDULED", new_attempt=True),
    ServiceStep("RUNNING", BATCH_REASON_PREFIX + TRAINING.message, training=TRAINING),
    ServiceStep("SUCCEEDED", BATCH_REASON_PREFIX + COMPLETED.message, training=COMPLETED),
)


@dataclass(frozen=True)
class Fault:
    """What the stand-in does with one create or submit: ``lost`` (it acts, its answer is lost: a read
    time-out) or ``refuse`` (a client error ``code`` with ``message``; nothing is created)."""

    kind: Literal["lost", "refuse"]
    code: str = ""
    message: str = ""


class ServiceFault(Exception):
    """An error answer of the stand-in (code, message, HTTP status)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


# -- the stand-in's records ----------------------------------------------------------------------------------


@functools.cache
def _output_members(service: str, operation: str) -> frozenset[str]:
    model = botocore.session.get_session().get_service_model(service)
    return frozenset(model.operation_model(operation).output_shape.members)


@dataclass
class FakeTrainingJob:
    """One training job: the request it was created with, its state, its transitions."""

    request: dict[str, Any]
    created: datetime
    script: list[Step]
    status: str = "InProgress"
    secondary: str = "Starting"
    failure_reason: str | None = None
    hosts_started: bool = False
    transitions: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.transitions.append({"Status": "Starting", "StartTime": self.created, "StatusMessage": "Starting"})

    @property
    def name(self) -> str:
        return str(self.request["TrainingJobName"])

    @property
    def arn(self) -> str:
        return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{self.name.lower()}"

    @property
    def running(self) -> bool:
        return self.status in ("InProgress", "Stopping")

    def move(self, step: Step, now: datetime) -> None:
        if step.secondary != self.secondary:
            self.transitions[-1]["EndTime"] = now
            self.transitions.append({"Status": step.secondary, "StartTime": now, "StatusMessage": step.message})
        self.status, self.secondary = step.status, step.secondary
        if step.failure_reason is not None:
            self.failure_reason = step.failure_reason
        self.hosts_started = self.hosts_started or step.secondary not in ("Starting", "Failed")

    def tick(self, now: datetime) -> None:
        if self.running and self.script:
            self.move(self.script.pop(0), now)

    def hosts(self) -> list[tuple[str, str | None]]:
        """``(algo-N, group)`` of every instance, in the order SageMaker numbers them."""
        resources = self.request.get("ResourceConfig") or {}
        groups = resources.get("InstanceGroups")
        if not groups:
            return [(f"algo-{n}", None) for n in range(1, int(resources.get("InstanceCount") or 1) + 1)]
        out: list[tuple[str, str | None]] = []
        for group in groups:
            for _ in range(int(group["InstanceCount"])):
                out.append((f"algo-{len(out) + 1}", str(group["InstanceGroupName"])))
        return out

    def describe(self) -> dict[str, Any]:
        members = _output_members("sagemaker", "DescribeTrainingJob")
        answer = {k: copy.deepcopy(v) for k, v in self.request.items() if k in members}
        output = (self.request.get("OutputDataConfig") or {}).get("S3OutputPath", "s3://bucket/output")
        answer.update(
            TrainingJobArn=self.arn,
            TrainingJobStatus=self.status,
            SecondaryStatus=self.secondary,
            SecondaryStatusTransitions=copy.deepcopy(self.transitions),
            CreationTime=self.created,
            ModelArtifacts={"S3ModelArtifacts": f"{output.rstrip('/')}/{self.name}/output/model.tar.gz"},
        )
        if self.failure_reason is not None:
            answer["FailureReason"] = self.failure_reason
        if not self.running:
            answer["TrainingEndTime"] = self.transitions[-1]["StartTime"]
        if not self.running and self.hosts_started:  # a job never placed has no training time
            stopping = self.request.get("StoppingCondition") or {}
            ran = 600 if self.secondary != "MaxRuntimeExceeded" else int(stopping.get("MaxRuntimeInSeconds", 600))
            answer["TrainingTimeInSeconds"] = ran
            answer["BillableTimeInSeconds"] = ran // 3 if self.request.get("EnableManagedSpotTraining") else ran
        if self.status == "Completed":
            answer["FinalMetricDataList"] = [{"MetricName": "loss", "Value": 0.25, "Timestamp": self.created}]
        return answer


@dataclass
class FakeServiceJob:
    """One SAGEMAKER_TRAINING service job: its SubmitServiceJob request, state and attempts."""

    number: int
    submit: dict[str, Any]
    created: datetime
    script: list[ServiceStep]
    status: str = "SUBMITTED"
    reason: str | None = None
    attempts: list[FakeTrainingJob] = field(default_factory=list)
    terminated: bool = False

    @property
    def job_id(self) -> str:
        return f"{self.number:08d}-0000-4000-8000-{self.number:012d}"

    @property
    def arn(self) -> str:
        return f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/{self.job_id}"

    @property
    def name(self) -> str:
        return str(self.submit["jobName"])

    @property
    def queue_arn(self) -> str:
        queue = str(self.submit["jobQueue"])
        return queue if queue.startswith("arn:") else f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/{queue}"

    @property
    def final(self) -> bool:
        return self.status in ("SUCCEEDED", "FAILED")

    def _attempt(self, job: FakeTrainingJob) -> dict[str, Any]:
        return {"serviceResourceId": {"name": "TrainingJobArn", "value": job.arn}, "startedAt": _ms(job.created)}

    def summary(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "jobArn": self.arn,
            "jobId": self.job_id,
            "jobName": self.name,
            "serviceJobType": "SAGEMAKER_TRAINING",
            "status": self.status,
            "createdAt": _ms(self.created),
        }
        if self.reason:
            answer["statusReason"] = self.reason
        if self.attempts:
            answer["latestAttempt"] = {"serviceResourceId": self._attempt(self.attempts[-1])["serviceResourceId"]}
        return answer

    def describe(self) -> dict[str, Any]:
        answer = {
            **self.summary(),
            "jobQueue": self.queue_arn,
            "attempts": [self._attempt(a) for a in self.attempts],
            "isTerminated": self.terminated,
            "serviceRequestPayload": self.submit["serviceRequestPayload"],
            "startedAt": _ms(self.attempts[0].created if self.attempts else self.created),
            "retryStrategy": self.submit.get("retryStrategy") or {"attempts": 1},
        }
        if self.submit.get("tags"):
            answer["tags"] = dict(self.submit["tags"])
        return answer


# -- the stand-in --------------------------------------------------------------------------------------------


class FakeAws:
    """SageMaker (training jobs, tags), AWS Batch (service jobs, the queue's front) and CloudWatch Logs (the
    training jobs' streams), as one account in ``us-east-1``.

    ``training``: the scripts of the directly created training jobs, in the order they are created (one
    without a script of its own :data:`RUNS`); ``services``: those of the service jobs, in submit order (one
    without: :data:`QUEUED_RUN`); ``create_faults`` / ``submit_faults``: what the n-th CreateTrainingJob /
    SubmitServiceJob (0-based) meets.
    """

    def __init__(
        self,
        *,
        training: tuple[tuple[Step, ...], ...] = (),
        services: tuple[tuple[ServiceStep, ...], ...] = (),
        create_faults: Mapping[int, Fault] | None = None,
        submit_faults: Mapping[int, Fault] | None = None,
        die_at_tick: int | None = None,
    ) -> None:
        self.training_scripts = [list(s) for s in training]
        self.service_scripts = [list(s) for s in services]
        self.create_faults = dict(create_faults or {})
        self.submit_faults = dict(submit_faults or {})
        self.die_at_tick = die_at_tick
        self.jobs: dict[str, FakeTrainingJob] = {}  # by lower-case name: SageMaker's names ignore case
        self.direct: list[FakeTrainingJob] = []
        self.service_jobs: list[FakeServiceJob] = []
        self.creates = 0
        self.submits = 0
        self.ticks = 0
        self.notes: list[str] = []  # what the stand-in did that no request shows (in the golden)
        self.problems: list[str] = []  # answers that do not fit the service model: the stand-in's bugs
        self.handlers: dict[tuple[str, str], Callable[[dict[str, Any]], dict[str, Any]]] = {
            ("sagemaker", "CreateTrainingJob"): self.create_training_job,
            ("sagemaker", "DescribeTrainingJob"): self.describe_training_job,
            ("sagemaker", "ListTags"): self.list_tags,
            ("sagemaker", "StopTrainingJob"): self.stop_training_job,
            ("batch", "SubmitServiceJob"): self.submit_service_job,
            ("batch", "ListServiceJobs"): self.list_service_jobs,
            ("batch", "DescribeServiceJob"): self.describe_service_job,
            ("batch", "GetJobQueueSnapshot"): self.job_queue_snapshot,
            ("batch", "TerminateServiceJob"): self.terminate_service_job,
            ("logs", "DescribeLogStreams"): self.describe_log_streams,
            ("logs", "GetLogEvents"): self.get_log_events,
        }

    @staticmethod
    def now() -> datetime:
        return datetime.now(UTC)

    # -- the clock ---------------------------------------------------------------------------------

    def tick(self) -> None:
        """One sleep of the task: every running job moves one step."""
        self.ticks += 1
        if self.die_at_tick is not None and self.ticks == self.die_at_tick:
            raise WorkerDied(f"the worker died at the stand-in's tick {self.ticks}")
        if self.ticks > MAX_TICKS:
            raise RuntimeError(f"more than {MAX_TICKS} sleeps of the task: a runaway wait")
        now = self.now()
        for job in self.direct:
            job.tick(now)
        for service in self.service_jobs:
            self.advance(service, now)

    def advance(self, service: FakeServiceJob, now: datetime) -> None:
        if service.final or not service.script:
            return
        step = service.script.pop(0)
        service.status, service.reason = step.status, step.reason
        if step.new_attempt:
            self.start_attempt(service, now)
        if step.training is not None and service.attempts:
            service.attempts[-1].move(step.training, now)

    def start_attempt(self, service: FakeServiceJob, now: datetime) -> None:
        """Batch creates the attempt's training job ``AWSBatch<payload name><32 hex>`` (checked as SageMaker would)."""
        request = json.loads(service.submit["serviceRequestPayload"])
        digest = hashlib.md5(f"{service.job_id}/{len(service.attempts) + 1}".encode()).hexdigest()
        request["TrainingJobName"] = f"AWSBatch{request.get('TrainingJobName', '')}{digest}"
        try:
            check_request("CreateTrainingJob", request)
        except (ClientError, ParamValidationError) as err:
            service.status, service.reason = "FAILED", f"{BATCH_REASON_PREFIX}ValidationException: {err}"
            self.notes.append(f"Batch could not create the attempt of {service.name}: {err}")
            return
        job = FakeTrainingJob(request, now, [])
        self.jobs[job.name.lower()] = job
        service.attempts.append(job)

    def trigger_wait(self, done: Callable[[], bool], what: str) -> None:
        """A trigger's wait: ticks until ``done`` (at most :data:`MAX_TRIGGER_TICKS`)."""
        for _ in range(MAX_TRIGGER_TICKS):
            if done():
                return
            self.tick()
        raise AssertionError(f"the trigger's wait for {what} never ended")

    # -- answers -----------------------------------------------------------------------------------

    def handle(self, service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        handler = self.handlers.get((service, operation))
        if handler is None:
            raise ServiceFault("UnsupportedOperation", f"the golden stand-in has no {service} {operation}")
        refused = service_refusal(operation, params, service)
        if refused is not None:
            raise ServiceFault("ValidationException", refused)
        return handler(params)

    def job(self, name: str) -> FakeTrainingJob:
        found = self.jobs.get(name.lower())
        if found is None:
            raise ServiceFault("ValidationException", "Requested resource not found.")
        return found

    def create_training_job(self, params: dict[str, Any]) -> dict[str, Any]:
        fault = self.create_faults.get(self.creates)
        self.creates += 1
        if fault is not None and fault.kind == "refuse":
            raise ServiceFault(fault.code, fault.message)
        name = str(params["TrainingJobName"])
        if name.lower() in self.jobs:
            raise ServiceFault("ResourceInUse", f"Training job {name} already exists")
        script = self.training_scripts.pop(0) if self.training_scripts else list(RUNS)
        job = FakeTrainingJob(copy.deepcopy(params), self.now(), script)
        self.jobs[name.lower()] = job
        self.direct.append(job)
        if fault is not None:
            raise ReadTimeoutError(endpoint_url=f"https://api.sagemaker.{REGION}.amazonaws.com/")
        return {"TrainingJobArn": job.arn}

    def describe_training_job(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.job(str(params["TrainingJobName"])).describe()

    def list_tags(self, params: dict[str, Any]) -> dict[str, Any]:
        arn = str(params["ResourceArn"])
        job = self.job(arn.rpartition("/")[2])
        return {"Tags": copy.deepcopy(job.request.get("Tags") or [])}

    def stop_training_job(self, params: dict[str, Any]) -> dict[str, Any]:
        job = self.job(str(params["TrainingJobName"]))
        if not job.running:
            raise ServiceFault("ValidationException", f"The job status is {job.status}")
        job.move(Step("Stopped", "Stopped", "Training job stopped"), self.now())
        return {}

    def submit_service_job(self, params: dict[str, Any]) -> dict[str, Any]:
        fault = self.submit_faults.get(self.submits)
        self.submits += 1
        if fault is not None and fault.kind == "refuse":
            raise ServiceFault(fault.code, fault.message)
        script = self.service_scripts.pop(0) if self.service_scripts else list(QUEUED_RUN)
        service = FakeServiceJob(len(self.service_jobs) + 1, copy.deepcopy(params), self.now(), script)
        self.service_jobs.append(service)
        if fault is not None:
            raise ReadTimeoutError(endpoint_url=f"https://batch.{REGION}.amazonaws.com/")
        return {"jobArn": service.arn, "jobName": service.name, "jobId": service.job_id}

    def service(self, job_id: str) -> FakeServiceJob:
        for service in self.service_jobs:
            if service.job_id == job_id:
                return service
        raise ServiceFault("ClientException", f"Job {job_id} not found")

    def list_service_jobs(self, params: dict[str, Any]) -> dict[str, Any]:
        names = {v.lower() for f in params.get("filters") or [] if f["name"] == "JOB_NAME" for v in f["values"]}
        found = [s.summary() for s in reversed(self.service_jobs) if not names or s.name.lower() in names]
        return {"jobSummaryList": found}

    def describe_service_job(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.service(str(params["jobId"])).describe()

    def job_queue_snapshot(self, params: dict[str, Any]) -> dict[str, Any]:
        queue = str(params["jobQueue"])
        waiting = [
            s for s in self.service_jobs if s.status == "RUNNABLE" and queue in (s.queue_arn, s.submit["jobQueue"])
        ]
        jobs = [{"jobArn": s.arn, "earliestTimeAtPosition": _ms(s.created)} for s in waiting]
        return {"frontOfQueue": {"jobs": jobs, "lastUpdatedAt": _ms(self.now())}}

    def terminate_service_job(self, params: dict[str, Any]) -> dict[str, Any]:
        service = self.service(str(params["jobId"]))
        if service.final:
            raise ServiceFault("ClientException", f"Job {service.job_id} is already {service.status}")
        service.terminated, service.status, service.reason = True, "FAILED", str(params["reason"])
        if service.attempts and service.attempts[-1].running:
            service.attempts[-1].move(Step("Stopped", "Stopped", "Training job stopped"), self.now())
        return {}

    def streams(self, job: FakeTrainingJob) -> list[tuple[str, str, str | None]]:
        """``(stream, host, group)`` of a job whose hosts started."""
        if not job.hosts_started:
            return []
        return [(f"{job.name}/{host}-1700000000", host, group) for host, group in job.hosts()]

    def describe_log_streams(self, params: dict[str, Any]) -> dict[str, Any]:
        prefix = str(params.get("logStreamNamePrefix") or "")
        job = self.jobs.get(prefix.rstrip("/").lower())
        found = self.streams(job) if job is not None else []
        return {"logStreams": [{"logStreamName": s, "creationTime": 1700000000000} for s, _, _ in found]}

    def get_log_events(self, params: dict[str, Any]) -> dict[str, Any]:
        stream = str(params["logStreamName"])
        job = self.jobs.get(stream.partition("/")[0].lower())
        lines = {s: (host, group) for s, host, group in (self.streams(job) if job is not None else [])}
        if stream not in lines:
            raise ServiceFault("ResourceNotFoundException", "The specified log stream does not exist.")
        host, group = lines[stream]
        messages = ["sagemaker-training-toolkit INFO     Invoking user script", f"SM_CURRENT_HOST={host}"]
        messages += [f"SM_CURRENT_INSTANCE_GROUP={group}"] if group else []
        messages += [f"epoch 1: loss 0.25 on {host}"]
        end = f"f/{len(messages):056d}"
        events = [] if params.get("nextToken") == end else messages
        return {
            "events": [
                {"timestamp": 1700000000000 + i, "message": m, "ingestionTime": 1700000000000}
                for i, m in enumerate(events)
            ],
            "nextForwardToken": end,
            "nextBackwardToken": f"b/{0:056d}",
        }


# -- recording -----------------------------------------------------------------------------------------------


class Recorder:
    """Every request of the botocore clients while installed (:func:`installed`), answered by ``aws``."""

    def __init__(self, aws: FakeAws) -> None:
        self.aws = aws
        self.requests: list[dict[str, Any]] = []

    def answer(self, service: str, operation: str, params: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        """Record the request, and the stand-in's answer as botocore's ``before-call`` returns one."""
        entry: dict[str, Any] = {"service": service, "operation": operation, "params": copy.deepcopy(params)}
        self.requests.append(entry)
        try:
            answer = self.aws.handle(service, operation, params)
        except ServiceFault as fault:
            entry["error"] = f"{fault.code}: {fault.message}"
            error = {"Error": {"Code": fault.code, "Message": fault.message}}
            return AWSResponse(None, fault.status, {}, None), {
                **error,
                "ResponseMetadata": {"HTTPStatusCode": fault.status},
            }
        except ReadTimeoutError:
            entry["error"] = "answer lost (read timeout) after the service acted"
            raise
        try:
            check_answer(operation, answer, service)
        except AssertionError as err:  # the stand-in's own bug: fails the case even if the task swallows it
            self.aws.problems.append(f"{service} {operation}: {err}")
            raise
        return AWSResponse(None, 200, {}, None), {**answer, "ResponseMetadata": {"HTTPStatusCode": 200}}

    def take(self) -> list[dict[str, Any]]:
        taken, self.requests = self.requests, []
        return taken


#: The recorder of the case running now (the clients are shared between cases, their handlers look it up).
_active: list[Recorder] = []
#: One client per service, region and endpoint for the whole session: building one costs 50-100 ms (its
#: endpoint rules), a case builds a dozen, and the stand-in answers whatever the client's config says.
_clients: dict[tuple[str, str | None, str | None], Any] = {}


def _keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """``before-parameter-build``: the parameters as the caller passed them (botocore validates them next)."""
    context["golden_params"] = copy.deepcopy(params)


def _before_call(service: str, model: Any, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
    """``before-call``: the answer of the active case's stand-in; nothing is sent."""
    if not _active:
        raise AssertionError("a golden stand-in client was used outside a recording")
    return _active[-1].answer(service, str(model.name), context["golden_params"])


def _client(create_client: Callable[..., Any], session: Any, service_name: str, **kwargs: Any) -> Any:
    key = (service_name, kwargs.get("region_name"), kwargs.get("endpoint_url"))
    if key not in _clients:
        session.register_component("data_loader", _shared_loader())
        client = create_client(session, service_name, **kwargs)
        client.meta.events.register("before-parameter-build", _keep_params)
        client.meta.events.register("before-call", functools.partial(_before_call, service_name))
        _clients[key] = client
    return _clients[key]


@functools.cache
def _shared_loader() -> Any:
    """One botocore data loader for every client (each hook's session would read the models' JSON again)."""
    return botocore.session.get_session().get_component("data_loader")


@contextmanager
def installed(aws: FakeAws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """Every botocore client answered by ``aws`` and recorded; ``time.sleep`` of this thread is ``aws``'s tick;
    the hooks' transient-error backoff a millisecond."""
    from airflow_hetero._retry import RetryPolicy
    from airflow_hetero.hooks.aws_base import HeteroAwsHook

    recorder = Recorder(aws)
    create_client = botocore.session.Session.create_client
    real_sleep = time.sleep
    thread = threading.get_ident()

    def recorded_client(session: botocore.session.Session, service_name: str, *args: Any, **kwargs: Any) -> Any:
        names = ("region_name", "api_version", "use_ssl", "verify", "endpoint_url")
        kwargs.update(zip(names, args, strict=False))
        return _client(create_client, session, service_name, **kwargs)

    def sleep(seconds: float) -> None:
        if threading.get_ident() != thread:
            real_sleep(seconds)
            return
        aws.tick()

    monkeypatch.setattr(botocore.session.Session, "create_client", recorded_client)
    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(
        HeteroAwsHook, "default_retry_policy", RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.002)
    )
    _active.append(recorder)
    try:
        yield recorder
    finally:
        _active.remove(recorder)


class RecordingTI:
    """A task instance for plain contexts: identity, and XComs (this try's, and earlier runs' in ``prior``,
    ``(task_id, key) -> value``, read with ``include_prior_dates``); every push kept in order."""

    def __init__(self, run_id: str, prior: Mapping[tuple[str, str], Any] | None = None) -> None:
        self.dag_id, self.task_id, self.run_id, self.map_index, self.try_number = "golden", "train", run_id, -1, 1
        self.stats_tags: dict[str, str] = {}  # Airflow 3.3's ResumableJobMixin reads them
        self.prior = dict(prior or {})
        self.store: dict[str, Any] = {}
        self.pushes: list[dict[str, Any]] = []

    def xcom_push(self, key: str, value: Any, **_: Any) -> None:
        self.pushes.append({"key": key, "value": copy.deepcopy(value)})
        self.store[key] = copy.deepcopy(value)

    def xcom_pull(
        self, task_ids: str | None = None, key: str = "return_value", include_prior_dates: bool = False, **_: Any
    ) -> Any:
        if task_ids in (None, self.task_id) and key in self.store:
            return copy.deepcopy(self.store[key])
        if include_prior_dates:
            return copy.deepcopy(self.prior.get((task_ids or self.task_id, key)))
        return None

    def new_try(self) -> None:
        """The next try of the task instance: Airflow clears the XComs of the try before."""
        self.try_number += 1
        self.store.clear()

    def take(self) -> list[dict[str, Any]]:
        taken, self.pushes = self.pushes, []
        return taken


# -- normalising and comparing -------------------------------------------------------------------------------


def _time_mask(value: float, now: float) -> str | None:
    if abs(value - now) < NEAR:
        return "<epoch>"
    if abs(value - now * 1000) < NEAR * 1000:
        return "<epoch-ms>"
    return None


def normalised(value: Any, now: float) -> Any:
    """``value`` as plain JSON with the volatile parts masked (see the module docstring)."""
    if isinstance(value, Mapping):
        out = {str(k): normalised(v, now) for k, v in sorted(value.items(), key=lambda item: str(item[0]))}
        started = value.get("started_at")
        deadline = value.get("deadline")
        if isinstance(started, int | float) and isinstance(deadline, int | float) and not isinstance(deadline, bool):
            out["deadline"] = f"<started_at + {round(deadline - started, 3):g} s>"
        if isinstance(value.get("queued_seconds"), int | float):  # a wall-clock wait of the stand-in's queue
            out["queued_seconds"] = "<seconds>"
        payload = value.get("serviceRequestPayload")
        if isinstance(payload, str):
            out["serviceRequestPayload"] = {"<json>": normalised(json.loads(payload), now)}
        return out
    if isinstance(value, list | tuple):
        return [normalised(v, now) for v in value]
    if isinstance(value, datetime):
        return "<datetime>"
    if isinstance(value, timedelta):
        return {"<timedelta seconds>": value.total_seconds()}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return _time_mask(float(value), now) or value
    if isinstance(value, bytes):
        return {"<bytes>": len(value), "sha256": hashlib.sha256(value).hexdigest()}
    return {"<repr>": repr(value)}


def canonical(value: Any) -> str:
    """The JSON text goldens are stored as."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def differing_paths(expected: Any, actual: Any, path: str = "") -> Iterator[str]:
    """``steps[0].requests[1].params.X: golden -> this run`` for each place the two values differ."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(k for k in actual if k not in expected)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                yield f"{where}: only in the golden"
            elif key not in expected:
                yield f"{where}: only in this run"
            else:
                yield from differing_paths(expected[key], actual[key], where)
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for n, (e, a) in enumerate(zip(expected, actual, strict=True)):
            yield from differing_paths(e, a, f"{path}[{n}]")
    elif expected != actual:
        shown = [json.dumps(v)[:120] for v in (expected, actual)]
        yield f"{path or '<root>'}: {shown[0]} -> {shown[1]}"


def json_diff(expected: Any, actual: Any, label: str, paths: int = 12) -> str:
    """Where the two values differ (the first ``paths`` places), then a unified diff of their canonical JSON;
    '' when they are equal."""
    if expected == actual:
        return ""
    places = list(differing_paths(expected, actual))
    head = [f"  {p}" for p in places[:paths]] + (
        [f"  ... and {len(places) - paths} more"] if len(places) > paths else []
    )
    lines = difflib.unified_diff(
        canonical(expected).splitlines(keepends=True),
        canonical(actual).splitlines(keepends=True),
        fromfile=f"{label} (golden)",
        tofile=f"{label} (this run)",
        n=4,
    )
    return "\n".join(["where (golden -> this run):", *head, ""]) + "".join(lines)


# -- the trigger's wait --------------------------------------------------------------------------------------


def _answer_for(aws: FakeAws, trigger: Any) -> dict[str, Any]:
    """What the trigger's watcher delivers at one poll: the job's description (a RUNNABLE service job with its
    place at the front of its queue, as :mod:`airflow_hetero.triggers.queue_watcher` adds it)."""
    from airflow_hetero.triggers.queue import HeteroServiceJobTrigger

    if isinstance(trigger, HeteroServiceJobTrigger):
        service = aws.service(str(trigger.job_id))
        answer = service.describe()
        if service.status == "RUNNABLE":
            front = aws.job_queue_snapshot({"jobQueue": service.queue_arn})["frontOfQueue"]["jobs"]
            answer["place"] = [j["jobArn"] for j in front].index(service.arn) + 1
        return answer
    return aws.job(str(trigger.job_name)).describe()


def trigger_event(aws: FakeAws, trigger: Any) -> dict[str, Any]:
    """The event ``trigger`` sends: its own ``_wait`` fed one answer per poll (the stand-in ticking between
    polls) until it decides; its class's ``run`` does the same with its watcher's answers."""
    import asyncio

    async def wait() -> dict[str, Any]:
        updates: asyncio.Queue[dict[str, Any] | BaseException] = asyncio.Queue()
        decided = asyncio.ensure_future(trigger._wait(updates))
        for _ in range(MAX_TRIGGER_TICKS):
            updates.put_nowait(_answer_for(aws, trigger))
            for _ in range(100):  # let the trigger read it (it awaits nothing else)
                await asyncio.sleep(0)
                if decided.done() or updates.empty():
                    break
            if decided.done():
                return dict(decided.result().payload)
            aws.tick()
        decided.cancel()
        raise AssertionError(f"{type(trigger).__name__} sent no event in {MAX_TRIGGER_TICKS} polls")

    return asyncio.run(wait())


# -- one case ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One golden: the operator's arguments, the stand-in's scripts, earlier runs' XComs, the tries.

    ``prior`` builds the earlier runs' XComs ``(task_id, key) -> value`` from the constructed operator (the
    right-sizing evidence needs its fingerprint). ``tries``: the task instance runs again after a try that
    died (``FakeAws.die_at_tick``), as Airflow retries it.
    """

    name: str
    about: str
    operator: Mapping[str, Any]
    training: tuple[tuple[Step, ...], ...] = ()
    services: tuple[tuple[ServiceStep, ...], ...] = ()
    create_faults: Mapping[int, Fault] = field(default_factory=dict)
    submit_faults: Mapping[int, Fault] = field(default_factory=dict)
    die_at_tick: int | None = None
    prior: Callable[[Any], dict[tuple[str, str], Any]] | None = None
    tries: int = 1
    run_id: str = "scheduled__2026-01-05T00:00:00+00:00"


def _outcome(call: Callable[[], Any]) -> tuple[dict[str, Any], Any]:
    """(what the call did, the TaskDeferred it raised or None)."""
    from airflow_hetero._compat import TaskDeferred

    try:
        return {"returned": call()}, None
    except TaskDeferred as deferred:
        path, kwargs = deferred.trigger.serialize()
        said = {
            "trigger": {"classpath": path, "kwargs": kwargs},
            "method_name": deferred.method_name,
            "kwargs": deferred.kwargs,
            "timeout": deferred.timeout,
        }
        return {"deferred": said}, deferred
    except WorkerDied as died:
        return {"worker_died": str(died)}, None
    except Exception as err:
        return {"raised": {"type": type(err).__name__, "message": str(err)}}, None


class CaseRun:
    """Runs one :class:`Case` against a fresh :class:`FakeAws`: construct, execute (each try), every resume."""

    def __init__(self, case: Case, monkeypatch: pytest.MonkeyPatch, state_store: Any = None) -> None:
        self.case = case
        self.state_store = state_store  # Airflow 3.3's context["task_state_store"] (None: a context without one)
        self.monkeypatch = monkeypatch
        self.aws = FakeAws(
            training=case.training,
            services=case.services,
            create_faults=case.create_faults,
            submit_faults=case.submit_faults,
            die_at_tick=case.die_at_tick,
        )
        self.steps: list[dict[str, Any]] = []
        self.started = time.time()  # times near it are masked

    def operator(self) -> Any:
        from airflow_hetero.operators import HeteroTrainingOperator

        kwargs = {
            "aws_conn_id": None,
            "region_name": REGION,
            "check_interval": 0.5,
            **copy.deepcopy(dict(self.case.operator)),
        }
        return HeteroTrainingOperator(task_id="train", **kwargs)

    def step(self, name: str, op: Any, ti: RecordingTI, call: Callable[[dict[str, Any]], Any], **said: Any) -> Any:
        """Render the task's templates (as Airflow does before each run of it), run ``call``, record the step."""
        context: dict[str, Any] = {"ti": ti, "task_instance": ti, "run_id": ti.run_id, "params": {}}
        if self.state_store is not None:
            context["task_state_store"] = self.state_store

        def run() -> Any:
            op.render_template_fields(context)
            return call(context)

        outcome, deferred = _outcome(run)
        entry = {"step": name, **said, "requests": self.recorder.take(), "xcom_pushes": ti.take(), "outcome": outcome}
        if self.aws.notes:
            entry["stand_in_notes"], self.aws.notes = self.aws.notes, []
        self.steps.append({key: normalised(value, self.started) for key, value in entry.items()})  # in this order
        return deferred

    def run(self) -> dict[str, Any]:
        """The case's record: its name, what it is about, and each step (see :meth:`step`)."""
        with installed(self.aws, self.monkeypatch) as self.recorder:
            self.run_tries()
        assert not self.aws.problems, "the stand-in answered outside the service model:\n" + "\n".join(
            self.aws.problems
        )
        return {"case": self.case.name, "about": self.case.about, "steps": self.steps}

    def run_tries(self) -> None:
        try:
            op = self.operator()
        except Exception as err:
            self.steps.append(
                {"step": "construct", "outcome": {"raised": {"message": str(err), "type": type(err).__name__}}}
            )
            return
        ti = RecordingTI(self.case.run_id, self.case.prior(op) if self.case.prior else None)
        for n in range(self.case.tries):
            if n:
                ti.new_try()
                op = self.operator()  # the retry's own task object
            deferred = self.step(f"execute (try {ti.try_number})", op, ti, op.execute)
            for _ in range(MAX_DEFERRALS):
                if deferred is None:
                    break
                event = trigger_event(self.aws, deferred.trigger)
                op = self.operator()  # the resumed task is a new object in a new process
                method, kwargs = deferred.method_name, {**copy.deepcopy(deferred.kwargs or {}), "event": event}
                deferred = self.step(
                    f"resume {method}",
                    op,
                    ti,
                    functools.partial(op.resume_execution, method, kwargs),
                    event=event,
                )
            if deferred is not None:
                why = f"{MAX_DEFERRALS} deferrals in a row: the recording stops here (a loop of deferrals)"
                self.steps.append({"step": "stopped", "why": why})
                return
