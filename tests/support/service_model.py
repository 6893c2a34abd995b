"""Refuse what SageMaker refuses: a request checked as botocore's client and the service check it.

Two checks, both from botocore's service model: botocore's own ``ParamValidator`` (required
members, types, unknown members: what a real client refuses before sending) and the endpoint's
:mod:`airflow_hetero.local.api.constraints` (lengths, patterns, enums, bounds: what the service
refuses with a ``ValidationException``). A fake called directly, with no botocore client in front of
it, runs both (:func:`check_request`); a fake behind a real client (moto, a stand-in endpoint) needs
only the service's (:func:`service_refusal`).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError, ParamValidationError
from botocore.validate import ParamValidator

from airflow_hetero.local.api.constraints import constraint_error, constraint_problems, service_model


def service_refusal(operation: str, params: dict[str, Any], service: str = "sagemaker") -> str | None:
    """The service's ValidationException message for ``params``, or None when it accepts them."""
    problems = constraint_problems(operation, params, service)
    return constraint_error(problems).message if problems else None


def check_request(operation: str, params: dict[str, Any], service: str = "sagemaker") -> None:
    """Raise as a real client and service would: ``ParamValidationError``, then ``ValidationException``."""
    shape = service_model(service).operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    if report.has_errors():
        raise ParamValidationError(report=report.generate_report())
    message = service_refusal(operation, params, service)
    if message is not None:
        error = {"Error": {"Code": "ValidationException", "Message": message}}
        raise ClientError({**error, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)


def check_answer(operation: str, answer: dict[str, Any], service: str = "sagemaker") -> None:
    """Raise AssertionError when ``answer`` (what a stand-in returns) does not fit the operation's
    output shape: a member the service never sends, or a value of another type."""
    shape = service_model(service).operation_model(operation).output_shape
    body = {k: v for k, v in answer.items() if k != "ResponseMetadata"}
    report = ParamValidator().validate(body, shape)
    assert not report.has_errors(), f"{operation} answer does not fit the service model:\n{report.generate_report()}"
