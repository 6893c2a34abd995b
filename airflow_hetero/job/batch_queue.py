"""Queue mode's settings and the service job it submits: :class:`BatchQueue` and the SubmitServiceJob request.

``HeteroTrainingOperator(batch_queue=...)`` takes a job queue's name or ARN, or a :class:`BatchQueue` with the
service job's own settings (fair-share identifier, scheduling priority, retry strategy, attempt timeout). Its
values are checked when it is made (at DAG parse), in Batch's words and limits
(:mod:`airflow_hetero.sagemaker_facts`); ``queue`` and ``share_identifier`` are templated and checked again once
rendered. :func:`submit_request` makes the SubmitServiceJob request around the CreateTrainingJob request direct
mode would send (its payload, at most 10 KiB), with the task instance's identity as tags and a ``clientToken``
derived from it. Pure: no AWS SDK, no Airflow; imported by a DAG file that names :class:`BatchQueue`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_hetero import sagemaker_facts as facts

__all__ = ["FALLBACKS_WITH_QUEUE", "BatchQueue", "BatchQueueError", "client_token", "submit_request"]

#: A job queue ARN: ``arn:<partition>:batch:<region>:<account>:job-queue/<name>``.
_QUEUE_ARN = re.compile(r"^arn:aws[a-z-]*:batch:[a-z0-9-]+:\d{12}:job-queue/[A-Za-z0-9_-]{1,128}$")
_NAME = re.compile(facts.BATCH_NAME_PATTERN)
_ACTIONS = ("RETRY", "EXIT")

#: Why fallback instance types and a queue are refused together.
FALLBACKS_WITH_QUEUE = (
    "fallback_instance_types cannot be used with batch_queue: AWS Batch requeues a job that failed with "
    "CapacityError itself (without using an attempt) and submits the same cluster again, so a fallback "
    "cluster would never be tried; give the queue's service environment the capacity, or drop batch_queue"
)


class BatchQueueError(ValueError):
    """A queue setting Batch would refuse, or a request too large for a queue; the message names the field."""


def _templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


class BatchQueue:
    """A SageMaker Training job queue of AWS Batch and how this task's service job waits in it.

    :param queue: the job queue's name or ARN (templated).
    :param share_identifier: the fair-share identifier (templated): required by a queue with a fair-share
        scheduling policy, refused by one without (Batch decides; not checked here).
    :param scheduling_priority: 0-9999, higher first within a share (needs a fair-share queue); None: Batch's.
    :param retry_strategy: Batch attempts: an int (1-10), or Batch's own shape ``{"attempts": 3,
        "evaluateOnExit": [{"action": "RETRY" | "EXIT", "onStatusReason": "<glob>"}]}``. Each attempt is a new
        training job; a requeue after ``CapacityError`` uses none.
    :param attempt_timeout: seconds an attempt may run (``timeoutConfig.attemptDurationSeconds``).
    """

    template_fields: Sequence[str] = ("queue", "share_identifier")

    def __init__(
        self,
        queue: str,
        *,
        share_identifier: str | None = None,
        scheduling_priority: int | None = None,
        retry_strategy: int | Mapping[str, Any] | None = None,
        attempt_timeout: int | None = None,
    ) -> None:
        self.queue = queue
        self.share_identifier = share_identifier
        self.scheduling_priority = scheduling_priority
        self.retry_strategy = _retry_strategy(retry_strategy)
        self.attempt_timeout = attempt_timeout
        problems = self.problems()
        if problems:
            raise BatchQueueError("batch_queue: " + "; ".join(problems))

    @classmethod
    def of(cls, value: str | BatchQueue) -> BatchQueue:
        """``value`` as a :class:`BatchQueue` (a string is a queue's name or ARN)."""
        if isinstance(value, BatchQueue):
            problems = value.problems()
            if problems:
                raise BatchQueueError("batch_queue: " + "; ".join(problems))
            return value
        if isinstance(value, str):
            return cls(value)
        raise BatchQueueError(f"batch_queue: a job queue's name or ARN, or a BatchQueue, got {type(value).__name__}")

    @property
    def attempts(self) -> int:
        """How many attempts Batch may make (1 without a retry strategy)."""
        return int((self.retry_strategy or {}).get("attempts", 1))

    def problems(self) -> list[str]:
        """Why Batch would refuse these settings (a template not yet rendered is not judged)."""
        found = [*_queue_problems(self.queue), *_share_problems(self.share_identifier)]
        priority = self.scheduling_priority
        if priority is not None and (
            isinstance(priority, bool)
            or not isinstance(priority, int)
            or not facts.BATCH_PRIORITY_MIN <= priority <= facts.BATCH_PRIORITY_MAX
        ):
            found.append(
                f"scheduling_priority must be an integer between {facts.BATCH_PRIORITY_MIN} and "
                f"{facts.BATCH_PRIORITY_MAX}, got {priority!r}"
            )
        timeout = self.attempt_timeout
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1):
            found.append(f"attempt_timeout must be a positive number of seconds (an integer), got {timeout!r}")
        return found + _retry_problems(self.retry_strategy)

    def submit_kwargs(self) -> dict[str, Any]:
        """The queue's members of a SubmitServiceJob request."""
        out: dict[str, Any] = {"jobQueue": self.queue}
        if self.share_identifier is not None:
            out["shareIdentifier"] = self.share_identifier
        if self.scheduling_priority is not None:
            out["schedulingPriority"] = self.scheduling_priority
        if self.retry_strategy is not None:
            out["retryStrategy"] = self.retry_strategy
        if self.attempt_timeout is not None:
            out["timeoutConfig"] = {"attemptDurationSeconds": self.attempt_timeout}
        return out

    def __repr__(self) -> str:
        fields = {"queue": self.queue, **{k: v for k, v in vars(self).items() if k != "queue" and v is not None}}
        return "BatchQueue(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BatchQueue) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable: Airflow renders its template fields in place


def _queue_problems(queue: Any) -> list[str]:
    if not isinstance(queue, str) or not queue:
        return [f"queue must be a job queue's name or ARN, got {queue!r}"]
    if _templated(queue) or _NAME.match(queue) or _QUEUE_ARN.match(queue):
        return []
    return [
        f"queue {queue!r} is neither a job queue name (1 to {facts.BATCH_NAME_MAX_LENGTH} letters, digits, '-' "
        "and '_') nor a job queue ARN (arn:aws:batch:<region>:<account>:job-queue/<name>)"
    ]


def _share_problems(share: Any) -> list[str]:
    if share is None or (isinstance(share, str) and (_templated(share) or _NAME.match(share))):
        return []
    return [f"share_identifier must be 1 to {facts.BATCH_NAME_MAX_LENGTH} letters, digits, '-' and '_', got {share!r}"]


def _retry_strategy(value: int | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The retry strategy in Batch's shape (an int is its ``attempts``), actions upper-cased."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return {"attempts": value}
    if not isinstance(value, Mapping):
        return {"attempts": value}  # judged by _retry_problems
    out = dict(value)
    rules = out.get("evaluateOnExit")
    if isinstance(rules, list | tuple):
        out["evaluateOnExit"] = [
            {**rule, "action": str(rule.get("action", "")).upper()} if isinstance(rule, Mapping) else rule
            for rule in rules
        ]
    return out


def _retry_problems(strategy: dict[str, Any] | None) -> list[str]:
    if strategy is None:
        return []
    found = []
    unknown = sorted(set(strategy) - {"attempts", "evaluateOnExit"})
    if unknown:
        found.append(f"retry_strategy has no member {', '.join(unknown)} (attempts, evaluateOnExit)")
    attempts = strategy.get("attempts")
    low, high = facts.BATCH_RETRY_ATTEMPTS_MIN, facts.BATCH_RETRY_ATTEMPTS_MAX
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not low <= attempts <= high:
        found.append(f"retry_strategy attempts must be between {low} and {high}, got {attempts!r}")
    rules = strategy.get("evaluateOnExit", [])
    if not isinstance(rules, list):
        return [*found, f"retry_strategy evaluateOnExit must be a list, got {rules!r}"]
    for index, rule in enumerate(rules):
        where = f"retry_strategy evaluateOnExit[{index}]"
        if not isinstance(rule, Mapping) or rule.get("action") not in _ACTIONS:
            found.append(f"{where}: action must be RETRY or EXIT, got {rule!r}")
            continue
        glob = rule.get("onStatusReason")
        if glob is not None and (not isinstance(glob, str) or len(glob) > facts.BATCH_ON_STATUS_REASON_MAX_LENGTH):
            most = facts.BATCH_ON_STATUS_REASON_MAX_LENGTH
            found.append(f"{where}: onStatusReason must be a glob of at most {most} characters")
    return found


def client_token(identity_digest: str, job_name: str) -> str:
    """The SubmitServiceJob ``clientToken`` of one task instance's service job ``job_name``: the same on
    every try of the task, another for another name (64 hex characters, Batch's maximum)."""
    digest = hashlib.sha256(f"{identity_digest}\x1f{job_name}".encode()).hexdigest()
    return digest[: facts.BATCH_CLIENT_TOKEN_MAX_LENGTH]


def payload_of(request: Mapping[str, Any]) -> str:
    """The ``serviceRequestPayload``: the CreateTrainingJob request as compact JSON."""
    return json.dumps(request, separators=(",", ":"), default=str)


def submit_request(
    queue: BatchQueue, request: Mapping[str, Any], tags: Sequence[Mapping[str, str]], identity_digest: str
) -> dict[str, Any]:
    """The SubmitServiceJob request of ``request`` (a CreateTrainingJob request, its name the service job's)
    in ``queue``, tagged with ``tags`` (the identity tags); BatchQueueError when Batch would refuse it."""
    name = str(request.get("TrainingJobName", ""))
    problems = queue.problems()
    payload = payload_of(request)
    size = len(payload.encode())
    if size > facts.BATCH_PAYLOAD_MAX_BYTES:
        problems.append(
            f"the CreateTrainingJob request is {size} bytes as JSON; a service job's serviceRequestPayload holds at "
            f"most {facts.BATCH_PAYLOAD_MAX_BYTES} (10 KiB): shorten hyperparameters, environment or tags"
        )
    if not _NAME.match(name) or len(name) > facts.BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH:
        problems.append(
            f"the training job name {name!r} must be at most {facts.BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH} "
            f"characters: Batch names each attempt {facts.BATCH_TRAINING_JOB_PREFIX}<name><32 hex>"
        )
    if problems:
        raise BatchQueueError("; ".join(problems))
    return {
        "jobName": name,
        "serviceJobType": facts.BATCH_SAGEMAKER_TRAINING,
        "serviceRequestPayload": payload,
        **queue.submit_kwargs(),
        "tags": {str(t["Key"]): str(t["Value"]) for t in tags},
        "clientToken": client_token(identity_digest, name),
    }
