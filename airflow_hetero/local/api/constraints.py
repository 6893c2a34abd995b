"""Refuse a request that breaks the constraints of botocore's service model, in the service's words.

SageMaker validates every member against its Smithy model and answers with one message listing
the violations ("2 validation errors detected: Value 'x' at 'trainingJobName' failed to satisfy
constraint: ..."). botocore's client-side validation checks only required members, types and
minimums, so a long job name, seven instance groups or an unknown instance type pass the client
and must be refused here. The rules come from one place, the definition's shape walk
(:mod:`airflow_hetero.definition.raw_request.service_shapes`, the model read without botocore, as request mode
reads it); this module only words its problems as the service does. Types and unknown members
are botocore's client-side business, so only required members and constraints are answered here.
"""

from __future__ import annotations

import functools
from typing import Any

from airflow_hetero.definition.facts.instance_types import training_instance_types
from airflow_hetero.definition.raw_request.service_shapes import check, operation_shapes
from airflow_hetero.local.api.errors import ServiceError, validation

__all__ = ["check_constraints", "constraint_error", "constraint_problems", "service_model", "training_instance_types"]

#: The kinds of shape problem the service words as constraint violations.
_ANSWERED = ("required", "constraint")


@functools.cache
def service_model(service: str = "sagemaker") -> Any:
    """botocore's model of ``service`` (the endpoint reads output shapes from it, not rules)."""
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def constraint_problems(operation: str, params: dict[str, Any], service: str = "sagemaker") -> list[str]:
    """All constraint violations of ``params`` for ``operation`` of ``service``, in the service's wording."""
    _, problems = check(operation_shapes(operation, service), params)
    return [p.service_message() for p in problems if p.kind in _ANSWERED]


def check_constraints(operation: str, params: dict[str, Any], service: str = "sagemaker") -> None:
    """Raise the service's ``ValidationException`` when ``params`` break the model's constraints."""
    problems = constraint_problems(operation, params, service)
    if problems:
        raise constraint_error(problems)


def constraint_error(problems: list[str], code: str = "ValidationException") -> ServiceError:
    """One refusal (``code``, SageMaker's ValidationException by default) listing every problem, as AWS words it."""
    count = len(problems)
    noun = "error" if count == 1 else "errors"
    message = f"{count} validation {noun} detected: " + "; ".join(problems)
    return validation(message) if code == "ValidationException" else ServiceError(code, message)
