"""Job outcome -> XCom result or task failure: the one rule shared by every waiting path.

The operator's synchronous wait, its ``execute_complete`` after deferral and the sensor all end
here, so Completed / Failed / Stopped mean the same thing everywhere: Completed succeeds,
Failed fails with the job's FailureReason, Stopped fails unless ``fail_on_stopped=False``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from airflow_hetero._compat import AirflowException
from airflow_hetero.job.resource_config import stated_groups

JobState = Literal["running", "succeeded", "failed", "stopped"]

_STATES: dict[str, JobState] = {
    "InProgress": "running",
    "Stopping": "running",
    "Completed": "succeeded",
    "Failed": "failed",
    "Stopped": "stopped",
    "Deleting": "failed",
}


def classify(describe: dict[str, Any]) -> JobState:
    """Map a DescribeTrainingJob answer to running / succeeded / failed / stopped.

    ``Stopping`` is still running (it ends as Stopped); ``Deleting`` can never succeed, so it counts
    as failed. An unknown status raises instead of being waited on forever.
    """
    status = describe.get("TrainingJobStatus")
    try:
        return _STATES[str(status)]
    except KeyError:
        raise ValueError(f"Unknown TrainingJobStatus {status!r} for job {describe.get('TrainingJobName')}") from None


class TrainingJobError(AirflowException):
    """A training job did not complete; ``job_name`` and ``status`` say which and how."""

    def __init__(
        self,
        message: str,
        *,
        job_name: str,
        status: str,
        failure_reason: str | None = None,
        describe: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.job_name = job_name
        self.status = status
        self.failure_reason = failure_reason
        #: The job's last DescribeTrainingJob answer, when the error comes from one (lineage on failure reads it).
        self.describe = describe


class TrainingJobFailedError(TrainingJobError):
    """The job ended Failed."""


class TrainingJobStoppedError(TrainingJobError):
    """The job ended Stopped and ``fail_on_stopped`` is set."""


class TrainingJobTimeoutError(TrainingJobError):
    """The job did not finish within the allowed time; it was asked to stop."""


#: How every timeout message ends when the task asked SageMaker to stop the job.
ASKED_TO_STOP = "; it was asked to stop"


class TrainingJobLimitError(TrainingJobStoppedError):
    """SageMaker stopped the job at one of its own limits (MaxRuntimeInSeconds, MaxWaitTimeInSeconds)."""


class TrainingJobBudgetError(TrainingJobLimitError):
    """SageMaker stopped the job at the runtime cap its budget (``max_cost``) set (docs/cost.md)."""


def still_stopping_error(name: str, timeout_seconds: float) -> TrainingJobTimeoutError:
    """The error of a job that stayed Stopping longer than ``stopping_timeout_seconds``."""
    return TrainingJobTimeoutError(
        f"Training job {name} is still Stopping after {timeout_seconds:g}s (stopping_timeout_seconds)",
        job_name=name,
        status="Stopping",
    )


#: SecondaryStatus of a job SageMaker stopped at a limit -> (StoppingCondition field, what it bounds).
LIMIT_STATUSES = {
    "MaxRuntimeExceeded": ("MaxRuntimeInSeconds", "its maximum run time"),
    "MaxWaitTimeExceeded": ("MaxWaitTimeInSeconds", "its maximum wait time for spot capacity plus run time"),
}


def limit_message(describe: dict[str, Any]) -> str | None:
    """``... exceeded MaxRuntimeInSeconds = 7200 s ...`` for a job stopped at a limit, else None."""
    secondary = describe.get("SecondaryStatus")
    if secondary not in LIMIT_STATUSES:
        return None
    field, meaning = LIMIT_STATUSES[str(secondary)]
    value = (describe.get("StoppingCondition") or {}).get(field)
    shown = f"{value} s" if value is not None else "not reported"
    knob = "max_run" if field == "MaxRuntimeInSeconds" else "max_wait"
    return (
        f"Training job {describe.get('TrainingJobName')} was stopped by SageMaker ({secondary}): it exceeded "
        f"{meaning}, {field} = {shown}; raise {knob} in the definition if it needs longer"
    )


def result_dict(describe: dict[str, Any]) -> dict[str, Any]:
    """The plain JSON-able dict pushed as XCom ``return_value`` by operator and sensor."""
    return {
        "training_job_name": describe.get("TrainingJobName"),
        "training_job_arn": describe.get("TrainingJobArn"),
        "status": describe.get("TrainingJobStatus"),
        "secondary_status": describe.get("SecondaryStatus"),
        "failure_reason": describe.get("FailureReason"),
        "instance_groups": stated_groups(describe),
        "model_artifacts": (describe.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
        "billable_seconds": describe.get("BillableTimeInSeconds"),
        "training_seconds": describe.get("TrainingTimeInSeconds"),
        "final_metrics": {str(m.get("MetricName")): m.get("Value") for m in describe.get("FinalMetricDataList") or []},
        "input_channels": input_channels_of(describe),
    }


def input_channels_of(describe: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{"channel", "s3_uri", "instance_groups", "distribution"}]`` from InputDataConfig (S3 channels)."""
    channels = []
    for channel in describe.get("InputDataConfig") or []:
        source = (channel.get("DataSource") or {}).get("S3DataSource") or {}
        channels.append(
            {
                "channel": channel.get("ChannelName"),
                "s3_uri": source.get("S3Uri"),
                "instance_groups": list(source.get("InstanceGroupNames") or []),
                "distribution": source.get("S3DataDistributionType"),
            }
        )
    return channels


def resolve_outcome(describe: dict[str, Any], *, fail_on_stopped: bool = True) -> dict[str, Any]:
    """Result dict for a finished job that counts as success; raise for one that does not.

    Raises ``ValueError`` for a job that is still running: callers only ask about finished jobs.
    """
    state = classify(describe)
    name = str(describe.get("TrainingJobName"))
    status = str(describe.get("TrainingJobStatus"))
    reason = describe.get("FailureReason")
    if state == "succeeded":
        return result_dict(describe)
    if state == "failed":
        limit = limit_message(describe)
        raise TrainingJobFailedError(
            f"Training job {name} ended {status}: {reason or 'no FailureReason given'}"
            + (f". {limit}" if limit else ""),
            job_name=name,
            status=status,
            failure_reason=reason,
            describe=describe,
        )
    if state == "stopped":
        if not fail_on_stopped:
            return result_dict(describe)
        limit = limit_message(describe)
        if limit is not None:
            raise TrainingJobLimitError(
                limit + " (pass fail_on_stopped=False to accept a stopped job)",
                job_name=name,
                status=status,
                failure_reason=reason,
                describe=describe,
            )
        raise TrainingJobStoppedError(
            f"Training job {name} was stopped"
            + (f": {reason}" if reason else "")
            + " (pass fail_on_stopped=False to accept a stopped job)",
            job_name=name,
            status=status,
            failure_reason=reason,
            describe=describe,
        )
    raise ValueError(f"Training job {name} is still {status}")


def outcome_from_event(
    event: dict[str, Any],
    *,
    describe: Callable[[str], dict[str, Any]],
    stop: Callable[[str], object] | None,
    fail_on_stopped: bool = True,
    timeout_message: str = "did not finish in time",
) -> dict[str, Any]:
    """Turn a :class:`~airflow_hetero.triggers.HeteroTrainingTrigger` event into the result dict.

    ``done`` re-describes the job (one call) so the XCom equals the synchronous path's;
    ``timeout`` asks ``stop`` to stop the job (when given) and fails; ``error`` fails with the
    trigger's message.
    """
    name = str(event.get("job_name"))
    status = event.get("status")
    if status == "done":
        return resolve_outcome(describe(name), fail_on_stopped=fail_on_stopped)
    if status == "timeout":
        if stop is not None:
            stop(name)
        raise TrainingJobTimeoutError(
            f"Training job {name} {timeout_message}"
            + (ASKED_TO_STOP if stop is not None else "")
            + f" (last status {event.get('job_status')} / {event.get('secondary_status')})",
            job_name=name,
            status=str(event.get("job_status")),
        )
    raise AirflowException(f"Waiting for training job {name} failed: {event.get('message') or event}")
