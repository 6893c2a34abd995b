"""The queues ``LocalEndpoint(batch_queues={NAME: N})`` and ``local serve --batch-queue NAME=N`` ask for.

Each is a service environment ``NAME-env`` of N instances and a FIFO ``SAGEMAKER_TRAINING`` job
queue ``NAME`` over it, made with the same CreateServiceEnvironment and CreateJobQueue requests a
client would send, and checked as Batch checks those (:func:`~.validators.check_request`) before the
endpoint starts: a name or a size Batch refuses is refused here too, with Batch's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local.batch import validators
from airflow_hetero.local.batch.exceptions import BatchError


def environment_name(queue: str) -> str:
    """The service environment ``--batch-queue NAME=N`` creates for queue ``NAME``."""
    return f"{queue}-env"


def environment_request(queue: str, size: int) -> dict[str, Any]:
    """The CreateServiceEnvironment request of queue ``queue``'s environment of ``size`` instances."""
    return {
        "serviceEnvironmentName": environment_name(queue),
        "serviceEnvironmentType": facts.BATCH_SAGEMAKER_TRAINING,
        "capacityLimits": [{"maxCapacity": size, "capacityUnit": facts.BATCH_CAPACITY_UNIT}],
    }


def queue_request(queue: str) -> dict[str, Any]:
    """The CreateJobQueue request of FIFO queue ``queue`` over its own environment."""
    return {
        "jobQueueName": queue,
        "priority": 1,
        "jobQueueType": facts.BATCH_SAGEMAKER_TRAINING,
        "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": environment_name(queue)}],
    }


def check_queues(queues: Mapping[str, int]) -> None:
    """``ValueError`` naming the first queue whose set-up Batch would refuse, with Batch's message."""
    for name, size in queues.items():
        try:
            validators.check_request("CreateServiceEnvironment", environment_request(name, size))
            validators.check_request("CreateJobQueue", queue_request(name))
        except BatchError as err:
            raise ValueError(f"batch queue {name!r}: {err.message}") from None
