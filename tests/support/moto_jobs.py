"""Make moto's SageMaker training jobs behave like real ones for status tests.

moto marks a job Completed the moment it is created and has no StopTrainingJob (DESIGN.md section
6). ``MotoJobs`` (used as a fixture) refuses every SageMaker request that SageMaker would refuse
(botocore's model: :mod:`support.service_model`), makes new jobs start InProgress/Starting, adds
StopTrainingJob (InProgress -> Stopping), lets a test move a job to any status, and counts the
CreateTrainingJob / DescribeTrainingJob / StopTrainingJob calls that reached moto, and refuses a
CreateTrainingJob the service would refuse (:func:`create_refusal`).
Works under ``mock_aws`` and behind ``ThreadedMotoServer`` alike (same in-process backends).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

import pytest
from moto import mock_aws
from moto.core.exceptions import JsonRESTError
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.sagemaker.models import FakeTrainingJob, SageMakerModelBackend, sagemaker_backends
from moto.sagemaker.responses import SageMakerResponse

from airflow_hetero._retry import RetryPolicy
from support.service_model import service_refusal

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole"
#: Retry backoff for tests: three tries, a millisecond or two apart.
#: How long moto's reset may take to answer (a local server, on a loaded machine).
RESET_TIMEOUT = 30
FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.002)


def hetero_request(name: str, **overrides: Any) -> dict[str, Any]:
    """A hand-written CreateTrainingJob request for a two-group heterogeneous job."""
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "RoleArn": ROLE,
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1-gpu-py310",
            "TrainingInputMode": "File",
        },
        "HyperParameters": {"sagemaker_program": '"train.py"', "epochs": "2"},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": "s3://bucket/train",
                        "S3DataDistributionType": "FullyReplicated",
                        "InstanceGroupNames": ["data_group"],
                    }
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/output"},
        "ResourceConfig": {
            "InstanceGroups": [
                {"InstanceGroupName": "data_group", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
                {"InstanceGroupName": "dnn_group", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 1},
            ],
            "VolumeSizeInGB": 30,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }
    request.update(overrides)
    return request


def create_job(server_url: str, name: str, **overrides: Any) -> None:
    """Create the :func:`hetero_request` job ``name`` (with ``overrides``) on the moto server at ``server_url``."""
    import boto3

    client = boto3.client("sagemaker", region_name="us-east-1", endpoint_url=server_url)
    client.create_training_job(**hetero_request(name, **overrides))


def throttling() -> JsonRESTError:
    """A ThrottlingException as moto's server sends it (HTTP 400, JSON 1.1 error body)."""
    return JsonRESTError("ThrottlingException", "Rate exceeded")


def server_error() -> JsonRESTError:
    """An InternalFailure with HTTP 500."""
    error = JsonRESTError("InternalFailure", "We encountered an internal error.")
    error.code = 500
    return error


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on a free local port, with moto's (process-wide) state reset; yields its URL."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    urllib.request.urlopen(
        urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=RESET_TIMEOUT
    ).close()
    try:
        yield url
    finally:
        server.stop()


@contextmanager
def mocked_jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    """``mock_aws`` with :class:`MotoJobs` installed; the hook retries per ``FAST``, botocore not at all."""
    from airflow_hetero.hooks.training import HeteroTrainingHook

    monkeypatch.setattr(HeteroTrainingHook, "default_retry_policy", FAST)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # no botocore-level retries: ours are under test
    with mock_aws():
        jobs = MotoJobs()
        jobs.install(monkeypatch)
        yield jobs


def aws_connection_env(conn_id: str, endpoint_url: str, region: str = "us-east-1") -> tuple[str, str]:
    """(env var name, value) defining an Airflow AWS connection that points at ``endpoint_url``."""
    extra = {"endpoint_url": endpoint_url, "region_name": region}
    return f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "aws", "extra": extra})


class MotoJobs:
    """Control moto's training jobs: initial status, status changes, stop, call counts."""

    def __init__(self, region: str = "us-east-1") -> None:
        self.region = region
        self.calls: Counter[str] = Counter()
        #: Per job, a list of callables run (and popped) one per DescribeTrainingJob.
        self.scripts: dict[str, list[Callable[[], None]]] = {}
        #: Steps scripted for every job created without a script of its own (names unknown ahead).
        self.every_job: list[dict[str, Any] | Exception] = []
        #: The ValidationException messages of the requests refused by botocore's model.
        self.refused: list[str] = []
        #: A test whose job never finishes fails here instead of waiting forever.
        self.max_describes = 300

    @property
    def backend(self) -> SageMakerModelBackend:
        return sagemaker_backends[ACCOUNT][self.region]

    def job(self, name: str) -> FakeTrainingJob:
        return self.backend.training_jobs[name]

    def names(self) -> list[str]:
        return list(self.backend.training_jobs)

    def set(
        self,
        name: str,
        status: str,
        secondary: str | None = None,
        message: str = "",
        failure_reason: str | None = None,
        **fields: Any,
    ) -> None:
        """Move job ``name`` to ``status`` (and a new SecondaryStatus with ``message``)."""
        job = self.job(name)
        job.training_job_status = status
        if secondary is not None and secondary != job.secondary_status:
            now = datetime.now(UTC)
            transitions = job.secondary_status_transitions
            if transitions:
                transitions[-1]["EndTime"] = now
            transitions.append({"Status": secondary, "StartTime": now, "StatusMessage": message})
            job.secondary_status = secondary
        if failure_reason is not None:
            job.failure_reason = failure_reason
        for key, value in fields.items():
            setattr(job, key, value)

    def script(self, name: str, *steps: dict[str, Any] | Exception) -> None:
        """Before each following DescribeTrainingJob of ``name``, apply the next step.

        A dict is passed to :meth:`set`; an exception is raised as the service's answer (use
        :func:`throttling` for a throttling error). Once the steps run out the job stays as it is.
        Steps wait for the job to exist, so a script can be set up before the job is created.
        """
        self.scripts[name] = [self._step(name, step) for step in steps]

    def _step(self, name: str, step: dict[str, Any] | Exception) -> Callable[[], None]:
        def run() -> None:
            if isinstance(step, Exception):
                raise step
            self.set(name, **step)

        return run

    # -- patches ----------------------------------------------------------------------------

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        jobs = self
        original_init = FakeTrainingJob.__init__
        original_create = SageMakerModelBackend.create_training_job
        original_describe = SageMakerModelBackend.describe_training_job

        def init(self: FakeTrainingJob, *args: Any, **kwargs: Any) -> None:
            original_init(self, *args, **kwargs)
            self.training_job_status = "InProgress"
            self.secondary_status = "Starting"
            del self.training_end_time
            del self.final_metric_data_list

        def create(self: SageMakerModelBackend, *args: Any, **kwargs: Any) -> Any:
            jobs.calls["CreateTrainingJob"] += 1
            job = original_create(self, *args, **kwargs)
            if jobs.every_job and job.training_job_name not in jobs.scripts:
                jobs.script(job.training_job_name, *jobs.every_job)
            return job

        def describe(self: SageMakerModelBackend, training_job_name: str) -> Any:
            jobs.calls["DescribeTrainingJob"] += 1
            if jobs.calls["DescribeTrainingJob"] > jobs.max_describes:
                raise RuntimeError(f"more than {jobs.max_describes} DescribeTrainingJob calls: runaway wait")
            steps = jobs.scripts.get(training_job_name)
            if steps and training_job_name in self.training_jobs:  # not for a find-before-create
                steps.pop(0)()
            return original_describe(self, training_job_name)

        def stop_training_job(self: SageMakerResponse) -> str:
            jobs.calls["StopTrainingJob"] += 1
            name = json.loads(self.body)["TrainingJobName"]
            backend = sagemaker_backends[self.current_account][self.region]
            job = backend.training_jobs.get(name)
            if job is None or job.training_job_status != "InProgress":
                status = "unknown" if job is None else job.training_job_status
                body = {
                    "__type": "ValidationException",
                    "message": f"The request was rejected because the training job is in status {status}.",
                }
                return json.dumps(body), {"status": 400}  # type: ignore[return-value]
            jobs.set(name, "Stopping", "Stopping", "Stopping the training job")
            return "{}"

        original_call_action = SageMakerResponse.call_action

        def call_action(self: SageMakerResponse) -> Any:
            # moto checks a few members by hand; SageMaker checks every one against its model
            refusal = service_refusal(self._get_action(), json.loads(self.body or b"{}"))
            if refusal is not None:
                jobs.refused.append(refusal)
                body = json.dumps({"__type": "ValidationException", "message": refusal})
                return 400, {"Content-Type": "application/x-amz-json-1.1"}, body
            return original_call_action(self)

        monkeypatch.setattr(SageMakerResponse, "call_action", call_action)
        monkeypatch.setattr(FakeTrainingJob, "__init__", init)
        monkeypatch.setattr(SageMakerModelBackend, "create_training_job", create)
        monkeypatch.setattr(SageMakerModelBackend, "describe_training_job", describe)
        monkeypatch.setattr(SageMakerResponse, "stop_training_job", stop_training_job, raising=False)
        original_create_response = SageMakerResponse.create_training_job

        def create_training_job(self: SageMakerResponse) -> Any:
            refusal = create_refusal(json.loads(self.body))  # after call_action checked the model's constraints
            if refusal is not None:
                jobs.refused.append(refusal)
                return json.dumps({"__type": "ValidationException", "message": refusal}), {"status": 400}
            return original_create_response(self)

        monkeypatch.setattr(SageMakerResponse, "create_training_job", create_training_job)


def create_refusal(request: dict[str, Any]) -> str | None:
    """What SageMaker answers a CreateTrainingJob request that meets the model's constraints but
    breaks the service's own rules (InstanceGroups next to InstanceType, channel groups that do not
    exist, ...), from the package's one place, in SageMaker's words; moto accepts anything."""
    from airflow_hetero.definition.raw_request.service_rules import service_problems

    refused = service_problems(request)
    return refused[0].msg if refused else None


LOG_GROUP = "/aws/sagemaker/TrainingJobs"


def put_logs(logs: Any, job: str, host: str, lines: list[str], start_ms: int | None = None) -> str:
    """Write ``lines`` to the stream ``<job>/<host>-<epoch>`` (created on first use); returns its name.

    Timestamps start at ``start_ms`` (default: a minute ago; CloudWatch drops events older than
    14 days) and grow by 1 ms per line.
    """
    if start_ms is None:
        start_ms = int(time.time() * 1000) - 60_000
    stream = f"{job}/{host}-1700000000"
    with suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=LOG_GROUP)
    with suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    events = [{"timestamp": start_ms + i, "message": line} for i, line in enumerate(lines)]
    if events:
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)
    return stream


def toolkit_startup(host: str, group: str) -> list[str]:
    """The lines the sagemaker-training toolkit prints at start-up that name host and group."""
    return [
        "sagemaker-training-toolkit INFO     Invoking user script",
        f"SM_CURRENT_HOST={host}",
        f"SM_CURRENT_INSTANCE_GROUP={group}",
    ]


def served_jobs(conn_id: str, server_url: str, monkeypatch: pytest.MonkeyPatch) -> MotoJobs:
    """Controlled jobs behind a moto server, reached through the Airflow connection ``conn_id``."""
    name, value = aws_connection_env(conn_id, server_url)
    monkeypatch.setenv(name, value)
    jobs = MotoJobs()
    jobs.install(monkeypatch)
    return jobs
