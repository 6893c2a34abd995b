"""Every request checked against botocore's ``batch`` model, every answer against its output shape.

Requests: the model's own rules (required members, member names, types, enums, lengths), read by
the shape walk request mode and the SageMaker side of the endpoint use
(:mod:`airflow_hetero.definition.raw_request.service_shapes`); then the rules the model states only
in words (name pattern, priority 0-9999, retry attempts 1-10, payload 10 KiB, time-limit bounds:
:mod:`airflow_hetero.sagemaker_facts`) and what the offline queue does not emulate (compute
environments, quota shares). Each refusal is a ``ClientException``. Answers: checked against the
operation's output shape with botocore's validator; one that does not fit is the endpoint's own
bug and answers ``ServerException`` rather than a wrong shape.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.definition.raw_request.service_shapes import check, operation_shapes
from airflow_hetero.local.batch.exceptions import ClientException, ServerException, refused

#: The ListServiceJobs filters the offline queue answers (QUOTA_SHARE_NAME needs a quota share, not emulated).
LIST_FILTERS = ("JOB_NAME", "BEFORE_CREATED_AT", "AFTER_CREATED_AT", "SHARE_IDENTIFIER")
#: ``fairsharePolicy`` bounds (the Batch API reference): decay up to a week, reservation below 100.
SHARE_DECAY_MAX_SECONDS = 604800
COMPUTE_RESERVATION_MAX = 99
_NAME = re.compile(facts.BATCH_NAME_PATTERN)


@functools.cache
def _model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("batch")


def check_shape(operation: str, body: dict[str, Any]) -> None:
    """Refuse ``body`` when it breaks the model: one ``ClientException`` listing every problem."""
    _, problems = check(operation_shapes(operation, "batch"), body)
    if not problems:
        return
    worded = [p.service_message() if p.kind in ("required", "constraint") else f"{p.wire}: {p.msg}" for p in problems]
    noun = "error" if len(worded) == 1 else "errors"
    raise ClientException(f"{len(worded)} validation {noun} detected: " + "; ".join(worded))


def check_answer(operation: str, answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` when it fits the operation's output shape; ``ServerException`` otherwise."""
    from botocore.validate import ParamValidator

    shape = _model().operation_model(operation).output_shape
    if shape is None:
        return answer
    report = ParamValidator().validate(answer, shape)
    if report.has_errors():
        raise ServerException(
            f"The local endpoint's {operation} answer does not fit Batch's model: {report.generate_report()}"
        )
    return answer


def check_name(what: str, name: str) -> None:
    """Names of jobs, queues, environments and policies: up to 128 letters, numbers, hyphens, underscores."""
    if not _NAME.fullmatch(name):
        raise refused(
            f"{what} should match valid pattern: up to {facts.BATCH_NAME_MAX_LENGTH} characters, letters, numbers, "
            f"hyphens (-) and underscores (_); got '{name[:200]}'"
        )


def _between(what: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise refused(f"{what} must be between {low} and {high}; got {value}")


def _create_service_environment(body: dict[str, Any]) -> None:
    check_name("Service environment name", body["serviceEnvironmentName"])
    _capacity_limits(body["capacityLimits"])


def _capacity_limits(limits: list[dict[str, Any]]) -> None:
    if len(limits) != 1:
        raise refused(f"capacityLimits must hold exactly one limit; got {len(limits)}")
    unit = limits[0].get("capacityUnit")
    if unit != facts.BATCH_CAPACITY_UNIT:
        raise refused(
            f"capacityUnit {unit!r} is not emulated: the local endpoint's service environments count "
            f"{facts.BATCH_CAPACITY_UNIT} (a quota-managed environment counts instance types)"
        )
    maximum = limits[0].get("maxCapacity")
    if maximum is None or maximum < 1:
        raise refused(f"maxCapacity must be a whole number of instances of at least 1; got {maximum}")


def _update_service_environment(body: dict[str, Any]) -> None:
    if body.get("capacityLimits") is not None:
        _capacity_limits(body["capacityLimits"])


def _create_job_queue(body: dict[str, Any]) -> None:
    check_name("Job queue name", body["jobQueueName"])
    if body.get("jobQueueType") != facts.BATCH_SAGEMAKER_TRAINING:
        raise refused(
            f"jobQueueType {body.get('jobQueueType')!r} is not emulated: the local endpoint's job queues are "
            f"{facts.BATCH_SAGEMAKER_TRAINING} queues of service environments"
        )
    if body.get("computeEnvironmentOrder"):
        raise refused("A job queue can't have both a serviceEnvironmentOrder and a computeEnvironmentOrder field")
    if not body.get("serviceEnvironmentOrder"):
        raise refused(f"A {facts.BATCH_SAGEMAKER_TRAINING} job queue needs a serviceEnvironmentOrder")
    for action in body.get("jobStateTimeLimitActions") or []:
        if action["state"] != facts.BATCH_TIME_LIMIT_STATE or action["action"] != facts.BATCH_TIME_LIMIT_ACTION:
            raise refused(
                f"For job queues connected to a {facts.BATCH_SAGEMAKER_TRAINING} service environment, the only "
                f"supported time-limit action is {facts.BATCH_TIME_LIMIT_ACTION} in state "
                f"{facts.BATCH_TIME_LIMIT_STATE}"
            )
        _between(
            "maxTimeSeconds",
            action["maxTimeSeconds"],
            facts.BATCH_TIME_LIMIT_MIN_SECONDS,
            facts.BATCH_TIME_LIMIT_MAX_SECONDS,
        )


def _create_scheduling_policy(body: dict[str, Any]) -> None:
    check_name("Scheduling policy name", body["name"])
    if body.get("quotaSharePolicy") is not None:
        raise refused("quotaSharePolicy is not emulated by the local endpoint: give a fairsharePolicy")
    policy = body.get("fairsharePolicy") or {}
    _between("shareDecaySeconds", policy.get("shareDecaySeconds", 0), 0, SHARE_DECAY_MAX_SECONDS)
    _between("computeReservation", policy.get("computeReservation", 0), 0, COMPUTE_RESERVATION_MAX)
    for share in policy.get("shareDistribution") or []:
        if share.get("weightFactor", facts.BATCH_DEFAULT_WEIGHT_FACTOR) <= 0:
            raise refused(f"weightFactor of share {share['shareIdentifier']} must be greater than 0")


def _submit_service_job(body: dict[str, Any]) -> None:
    check_name("Job name", body["jobName"])
    size = len(body["serviceRequestPayload"].encode("utf-8"))
    if size > facts.BATCH_PAYLOAD_MAX_BYTES:
        raise refused(
            f"serviceRequestPayload is {size} bytes; the maximum is {facts.BATCH_PAYLOAD_MAX_BYTES} bytes (10 KiB)"
        )
    if body.get("schedulingPriority") is not None:
        _priority(body["schedulingPriority"])
    strategy = body.get("retryStrategy")
    if strategy is not None:
        _between(
            "retryStrategy.attempts",
            strategy["attempts"],
            facts.BATCH_RETRY_ATTEMPTS_MIN,
            facts.BATCH_RETRY_ATTEMPTS_MAX,
        )
        for rule in strategy.get("evaluateOnExit") or []:
            if rule.get("action") is None or rule.get("onStatusReason") is None:
                raise refused("Each evaluateOnExit entry needs an action and an onStatusReason")
            if len(rule["onStatusReason"]) > facts.BATCH_ON_STATUS_REASON_MAX_LENGTH:
                raise refused(f"onStatusReason can contain up to {facts.BATCH_ON_STATUS_REASON_MAX_LENGTH} characters")
    timeout = (body.get("timeoutConfig") or {}).get("attemptDurationSeconds")
    if timeout is not None and timeout < 1:
        raise refused(f"attemptDurationSeconds must be at least 1; got {timeout}")
    if body.get("quotaShareName") is not None:
        raise refused("quotaShareName is not emulated by the local endpoint (no quota-share scheduling policy)")


def _priority(value: int) -> None:
    _between("schedulingPriority", value, facts.BATCH_PRIORITY_MIN, facts.BATCH_PRIORITY_MAX)


def _update_service_job(body: dict[str, Any]) -> None:
    if body.get("schedulingPriority") is not None:
        _priority(body["schedulingPriority"])


def _list_service_jobs(body: dict[str, Any]) -> None:
    if body.get("maxResults") is not None:
        _between("maxResults", body["maxResults"], 1, facts.BATCH_LIST_MAX_RESULTS)
    filters = body.get("filters") or []
    if len(filters) > 1:
        raise refused("Only one filter can be used at a time")
    for item in filters:
        if item.get("name") not in LIST_FILTERS:
            raise refused(f"filter name {item.get('name')!r} is not one of {', '.join(LIST_FILTERS)}")
        if not item.get("values"):
            raise refused(f"filter {item['name']} needs a value")


def _describe_job_queues(body: dict[str, Any]) -> None:
    if body.get("maxResults") is not None:
        _between("maxResults", body["maxResults"], 1, facts.BATCH_LIST_MAX_RESULTS)


#: The rules beyond the model, by operation.
RULES: dict[str, Callable[[dict[str, Any]], None]] = {
    "CreateServiceEnvironment": _create_service_environment,
    "UpdateServiceEnvironment": _update_service_environment,
    "CreateJobQueue": _create_job_queue,
    "CreateSchedulingPolicy": _create_scheduling_policy,
    "SubmitServiceJob": _submit_service_job,
    "UpdateServiceJob": _update_service_job,
    "ListServiceJobs": _list_service_jobs,
    "DescribeJobQueues": _describe_job_queues,
    "DescribeServiceEnvironments": _describe_job_queues,
}


def check_request(operation: str, body: dict[str, Any]) -> None:
    """Refuse ``body`` as Batch would: the model's rules, then the ones it states in words."""
    check_shape(operation, body)
    rule = RULES.get(operation)
    if rule is not None:
        rule(body)
