"""The endpoint's training service as the offline queue's :class:`~airflow_hetero.local.batch.lifecycle.TrainingJobs`.

Each attempt of a service job is an ordinary CreateTrainingJob on this endpoint (checked, recorded,
run, logged as any other); a refusal reaches the queue as ``TrainingRefused`` with SageMaker's code
and message. Also the set-up ``local serve --batch-queue NAME=N`` and ``LocalEndpoint(batch_queues=...)``
ask for: a service environment of N instances and a queue over it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from airflow_hetero.local.api.errors import ServiceError
from airflow_hetero.local.api.service import TrainingService
from airflow_hetero.local.batch.backend import BatchBackend
from airflow_hetero.local.batch.lifecycle import TrainingRefused
from airflow_hetero.local.batch.setup import check_queues, environment_name, environment_request, queue_request


class ServiceTrainingJobs:
    """Create, describe and stop training jobs of a :class:`TrainingService` for the queue."""

    def __init__(self, service: TrainingService) -> None:
        self.service = service

    def create(self, request: dict[str, Any], region: str) -> str:
        try:
            return str(self.service.create(request, region)["TrainingJobArn"])
        except ServiceError as err:
            raise TrainingRefused(err.code, err.message) from None

    def describe(self, name: str) -> dict[str, Any] | None:
        try:
            return self.service.describe({"TrainingJobName": name})  # what DescribeTrainingJob answers
        except ServiceError:  # Requested resource not found
            return None

    def stop(self, name: str) -> None:
        with contextlib.suppress(ServiceError):  # already ended (or ending): nothing to stop
            self.service.stop({"TrainingJobName": name})


def ensure_queues(backend: BatchBackend, queues: Mapping[str, int], region: str) -> list[str]:
    """For each ``NAME: N``, a service environment ``NAME-env`` of N instances and a FIFO queue ``NAME`` over it
    (kept when the workdir has them already: the capacity is set to N). Lines saying what was done.
    ``ValueError`` (before anything is made) for a queue whose set-up Batch would refuse."""
    check_queues(queues)
    said = []
    for name, size in queues.items():
        env = environment_request(name, int(size))
        if any(e.name == env["serviceEnvironmentName"] for e in backend.store.environments.values()):
            backend.update_service_environment(
                {"serviceEnvironment": env["serviceEnvironmentName"], "capacityLimits": env["capacityLimits"]}
            )
        else:
            backend.create_service_environment(env, region)
        if not any(q.name == name for q in backend.store.queues.values()):
            backend.create_job_queue(queue_request(name), region)
        queue = backend.queue(name)
        said.append(
            f"batch job queue {name} ({queue.arn}) on service environment {environment_name(name)}: {size} instance(s)"
        )
    return said
