"""The error a SageMaker JSON 1.1 action answers with: code, message and HTTP status."""

from __future__ import annotations


class ServiceError(Exception):
    """A refusal shaped like SageMaker's own (``__type`` code plus ``message``).

    botocore turns the answer into ``ClientError`` with ``Error.Code == code``, so callers see the
    same exception they would get from the real service.
    """

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def validation(message: str) -> ServiceError:
    """A ``ValidationException`` (HTTP 400), SageMaker's answer to most bad requests."""
    return ServiceError("ValidationException", message)


def not_found() -> ServiceError:
    """What SageMaker answers for a training job it does not know."""
    return validation("Requested resource not found.")
