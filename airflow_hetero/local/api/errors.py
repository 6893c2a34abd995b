"""The error a SageMaker JSON 1.1 action answers with: code, message and HTTP status."""

from __future__ import annotations

from airflow_hetero.sagemaker_facts import QUOTA_INCREASE_ADVICE, SERVICE_LIMIT_MESSAGE, TRAINING_QUOTA_NAME


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


def resource_limit_exceeded(name: str, limit: int, used: int, delta: int, advice: str) -> ServiceError:
    """SageMaker's answer to a create beyond an account-level limit (the one wording of every such refusal)."""
    message = SERVICE_LIMIT_MESSAGE.format(name=name, limit=limit, used=used, delta=delta, advice=advice)
    return ServiceError("ResourceLimitExceeded", message)


def quota_exceeded(instance_type: str, limit: int, used: int, delta: int) -> ServiceError:
    """A create beyond the account's training quota of ``instance_type``, in the service's words."""
    name = TRAINING_QUOTA_NAME.format(instance_type=instance_type)
    return resource_limit_exceeded(name, limit, used, delta, QUOTA_INCREASE_ADVICE)
