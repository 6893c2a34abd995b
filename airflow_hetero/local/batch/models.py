"""What the offline queue holds: service environments, job queues, scheduling policies, service jobs, attempts.

Plain dataclasses that say what each is and how Batch describes it (camelCase answers, times in
milliseconds since the epoch); they persist as JSON (:meth:`to_json` / ``from_json``) through
:mod:`.backend`'s store, so a restarted endpoint finds its queues and jobs again.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airflow_hetero import sagemaker_facts as facts

ACCOUNT_ID = "123456789012"
_T = TypeVar("_T")


def now_ms() -> int:
    """The current time as Batch states times: milliseconds since the epoch."""
    return int(time.time() * 1000)


def arn(region: str, kind: str, name: str) -> str:
    """``arn:aws:batch:<region>:<account>:<kind>/<name>``."""
    return f"arn:aws:batch:{region}:{ACCOUNT_ID}:{kind}/{name}"


class _Json:
    """Dataclasses that persist as a JSON object of their fields."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload, no-any-return]

    @classmethod
    def from_json(cls: type[_T], data: dict[str, Any]) -> _T:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class ServiceEnvironment(_Json):
    """A SAGEMAKER_TRAINING service environment: at most ``max_capacity`` instances at once."""

    name: str
    arn: str
    max_capacity: int
    state: str = "ENABLED"
    tags: dict[str, str] | None = None

    def describe(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "serviceEnvironmentName": self.name,
            "serviceEnvironmentArn": self.arn,
            "serviceEnvironmentType": facts.BATCH_SAGEMAKER_TRAINING,
            "state": self.state,
            "status": "VALID",
            "capacityLimits": [{"maxCapacity": self.max_capacity, "capacityUnit": facts.BATCH_CAPACITY_UNIT}],
        }
        if self.tags:
            answer["tags"] = dict(self.tags)
        return answer


@dataclass
class TimeLimitAction(_Json):
    """Terminate a job blocked RUNNABLE at the head of the queue for ``max_time_seconds``."""

    reason: str
    max_time_seconds: int
    state: str = facts.BATCH_TIME_LIMIT_STATE
    action: str = facts.BATCH_TIME_LIMIT_ACTION

    def describe(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "state": self.state,
            "maxTimeSeconds": self.max_time_seconds,
            "action": self.action,
        }


@dataclass
class JobQueue(_Json):
    """A SAGEMAKER_TRAINING job queue over its service environments (ARNs, in their order)."""

    name: str
    arn: str
    priority: int
    environments: list[str]
    environment_orders: list[int]
    scheduling_policy_arn: str | None = None
    time_limits: list[dict[str, Any]] = field(default_factory=list)
    state: str = "ENABLED"
    tags: dict[str, str] | None = None

    def limits(self) -> list[TimeLimitAction]:
        """``time_limits`` holds them as the API states them (``maxTimeSeconds``, ...)."""
        return [
            TimeLimitAction(
                reason=item["reason"],
                max_time_seconds=int(item["maxTimeSeconds"]),
                state=item["state"],
                action=item["action"],
            )
            for item in self.time_limits
        ]

    def describe(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "jobQueueName": self.name,
            "jobQueueArn": self.arn,
            "state": self.state,
            "status": "VALID",
            "priority": self.priority,
            "computeEnvironmentOrder": [],
            "serviceEnvironmentOrder": [
                {"order": order, "serviceEnvironment": env}
                for order, env in zip(self.environment_orders, self.environments, strict=True)
            ],
            "jobQueueType": facts.BATCH_SAGEMAKER_TRAINING,
            "jobStateTimeLimitActions": [limit.describe() for limit in self.limits()],
        }
        if self.scheduling_policy_arn:
            answer["schedulingPolicyArn"] = self.scheduling_policy_arn
        if self.tags:
            answer["tags"] = dict(self.tags)
        return answer


@dataclass
class SchedulingPolicy(_Json):
    """A fair-share policy: each share identifier's weight (lower weight, more of the capacity)."""

    name: str
    arn: str
    shares: list[dict[str, Any]] = field(default_factory=list)
    share_decay_seconds: int = 0
    compute_reservation: int = 0
    tags: dict[str, str] | None = None

    def weight(self, share: str | None) -> float:
        """The weight of ``share``: its own entry, else the entry of a prefix ending in ``*``, else 1.0."""
        for entry in self.shares:
            if entry["shareIdentifier"] == share:
                return float(entry.get("weightFactor", facts.BATCH_DEFAULT_WEIGHT_FACTOR))
        for entry in self.shares:
            prefix = entry["shareIdentifier"]
            if prefix.endswith("*") and (share or "").startswith(prefix[:-1]):
                return float(entry.get("weightFactor", facts.BATCH_DEFAULT_WEIGHT_FACTOR))
        return facts.BATCH_DEFAULT_WEIGHT_FACTOR


@dataclass
class Attempt(_Json):
    """One try of a service job: the training job Batch created for it (``AWSBatch<name><32 hex>``)."""

    training_job_name: str
    training_job_arn: str
    started_at: int
    stopped_at: int | None = None
    status_reason: str | None = None
    counted: bool = True
    """False for an attempt requeued after a CapacityError: it uses none of the retry strategy's attempts."""
    timed_out: bool = False
    """Batch stopped its training job at the job's ``attemptDurationSeconds``."""

    def describe(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "serviceResourceId": {"name": "TrainingJobArn", "value": self.training_job_arn},
            "startedAt": self.started_at,
        }
        if self.stopped_at is not None:
            answer["stoppedAt"] = self.stopped_at
        if self.status_reason is not None:
            answer["statusReason"] = self.status_reason
        return answer


@dataclass
class ServiceJob(_Json):
    """A SAGEMAKER_TRAINING service job, as SubmitServiceJob made it and the scheduler moved it on."""

    job_id: str
    job_name: str
    job_arn: str
    queue_arn: str
    payload: str
    created_at: int
    seq: int
    """Submission order (FIFO, and the tie-break of every other order)."""
    instances: int
    """Instances the job asks for: InstanceCount, or the sum over InstanceGroups (our reading)."""
    status: str = "SUBMITTED"
    status_reason: str | None = None
    retry_strategy: dict[str, Any] | None = None
    scheduling_priority: int | None = None
    share_identifier: str | None = None
    timeout_config: dict[str, Any] | None = None
    preemption_configuration: dict[str, Any] | None = None
    tags: dict[str, str] | None = None
    client_token: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    environment: str | None = None
    """The service environment whose capacity the running attempt holds."""
    runnable_since: int | None = None
    not_before: int | None = None
    """A requeued job waits until then (ms) before it may be admitted again."""
    blocked_since: int | None = None
    """Since when the job has been blocked at the head of its queue (time-limit actions count from it)."""
    scheduled_at: int | None = None
    started_at: int | None = None
    stopped_at: int | None = None
    is_terminated: bool = False
    terminate_reason: str | None = None

    # -- attempts ------------------------------------------------------------------------------
    def attempt_list(self) -> list[Attempt]:
        return [Attempt.from_json(item) for item in self.attempts]

    def latest(self) -> Attempt | None:
        return Attempt.from_json(self.attempts[-1]) if self.attempts else None

    def set_latest(self, attempt: Attempt) -> None:
        self.attempts[-1] = attempt.to_json()

    def used_attempts(self) -> int:
        return sum(1 for a in self.attempt_list() if a.counted)

    def max_attempts(self) -> int:
        return int((self.retry_strategy or {}).get("attempts", facts.BATCH_RETRY_ATTEMPTS_MIN))

    def retries(self, reason: str) -> bool:
        """Whether a failed attempt with ``reason`` is retried: the first evaluateOnExit rule whose glob matches
        decides (RETRY or EXIT); none matching retries. Never beyond the strategy's attempts."""
        if self.used_attempts() >= self.max_attempts():
            return False
        for rule in (self.retry_strategy or {}).get("evaluateOnExit") or []:
            if fnmatch.fnmatchcase(reason, rule["onStatusReason"]):
                return bool(rule["action"].upper() == "RETRY")
        return True

    @property
    def final(self) -> bool:
        return self.status in facts.BATCH_FINAL_STATUSES

    # -- answers -------------------------------------------------------------------------------
    def capacity_usage(self) -> list[dict[str, Any]]:
        return [{"capacityUnit": facts.BATCH_CAPACITY_UNIT, "quantity": float(self.instances)}]

    def describe(self) -> dict[str, Any]:
        """The DescribeServiceJob answer (``startedAt`` is required by the model: createdAt until an attempt starts)."""
        answer: dict[str, Any] = {
            "attempts": [a.describe() for a in self.attempt_list()],
            "capacityUsage": self.capacity_usage(),
            "createdAt": self.created_at,
            "isTerminated": self.is_terminated,
            "jobArn": self.job_arn,
            "jobId": self.job_id,
            "jobName": self.job_name,
            "jobQueue": self.queue_arn,
            "retryStrategy": self.retry_strategy or {"attempts": facts.BATCH_RETRY_ATTEMPTS_MIN},
            "serviceRequestPayload": self.payload,
            "serviceJobType": facts.BATCH_SAGEMAKER_TRAINING,
            "startedAt": self.started_at if self.started_at is not None else self.created_at,
            "status": self.status,
        }
        optional = {
            "schedulingPriority": self.scheduling_priority,
            "shareIdentifier": self.share_identifier,
            "statusReason": self.status_reason,
            "scheduledAt": self.scheduled_at,
            "stoppedAt": self.stopped_at,
            "tags": dict(self.tags) if self.tags else None,
            "timeoutConfig": self.timeout_config,
            "preemptionConfiguration": self.preemption_configuration,
        }
        answer.update({k: v for k, v in optional.items() if v is not None})
        latest = self.latest()
        if latest is not None:
            answer["latestAttempt"] = {"serviceResourceId": latest.describe()["serviceResourceId"]}
        return answer

    def summary(self) -> dict[str, Any]:
        """The ListServiceJobs entry."""
        answer: dict[str, Any] = {
            "capacityUsage": self.capacity_usage(),
            "createdAt": self.created_at,
            "jobArn": self.job_arn,
            "jobId": self.job_id,
            "jobName": self.job_name,
            "serviceJobType": facts.BATCH_SAGEMAKER_TRAINING,
            "status": self.status,
        }
        optional = {
            "shareIdentifier": self.share_identifier,
            "statusReason": self.status_reason,
            "scheduledAt": self.scheduled_at,
            "startedAt": self.started_at,
            "stoppedAt": self.stopped_at,
        }
        answer.update({k: v for k, v in optional.items() if v is not None})
        latest = self.latest()
        if latest is not None:
            answer["latestAttempt"] = {"serviceResourceId": latest.describe()["serviceResourceId"]}
        return answer


def payload_instances(payload: str) -> int:
    """Instances a CreateTrainingJob payload asks for: the sum over ``InstanceGroups``, else ``InstanceCount``
    (1 when the payload cannot be read: it fails when its attempt is created, as Batch's would)."""
    try:
        request = json.loads(payload)
        config = request.get("ResourceConfig") or {}
        groups = config.get("InstanceGroups")
        if groups:
            return max(1, sum(int(g.get("InstanceCount", 0)) for g in groups))
        return max(1, int(config.get("InstanceCount", 1)))
    except (ValueError, TypeError, AttributeError):
        return 1
