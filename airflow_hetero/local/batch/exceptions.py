"""Batch's two errors: ``ClientException`` (HTTP 400) and ``ServerException`` (HTTP 500).

botocore's ``batch`` model has no other: every refusal, a bad parameter as much as an unknown
queue, is a ``ClientException`` whose message says what is wrong. Batch prefixes the messages of
the refusals it finds while executing a request with ``Error executing request, Exception : ``
(as in its "Job name should match valid pattern"); the offline queue words its own the same way.
"""

from __future__ import annotations

#: How Batch begins the message of a request it refused while executing it.
EXECUTING = "Error executing request, Exception : "


class BatchError(Exception):
    """A refusal shaped like Batch's: the error code, its message and HTTP status."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


class ClientException(BatchError):
    """What Batch answers to a request it will not carry out (HTTP 400)."""

    def __init__(self, message: str) -> None:
        super().__init__("ClientException", message, 400)


class ServerException(BatchError):
    """What Batch answers when the fault is its own (HTTP 500; clients retry it)."""

    def __init__(self, message: str) -> None:
        super().__init__("ServerException", message, 500)


def refused(message: str) -> ClientException:
    """A ``ClientException`` worded as Batch's refusals found while executing a request."""
    return ClientException(EXECUTING + message)


def not_found(kind: str, name: str) -> ClientException:
    """A queue, environment, policy or job that does not exist."""
    return refused(f"{kind} {name} does not exist")


def not_emulated(operation: str) -> ClientException:
    """An operation of Batch's API the offline queue does not answer (compute jobs, quota shares, ...)."""
    return ClientException(
        f"Batch.{operation} is not emulated by the airflow-hetero local endpoint: it answers the SageMaker "
        "Training service-job API (service environments, SAGEMAKER_TRAINING job queues, fair-share scheduling "
        "policies, service jobs)."
    )
