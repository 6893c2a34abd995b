"""Batch's rest-json routing: ``POST /v1/<lowercased operation>`` with a JSON body, a JSON answer.

:class:`BatchResponses` maps each path to its operation, checks the request against botocore's
model (:mod:`.validators`), lets :class:`~.backend.BatchBackend` answer and checks the answer
against the output shape. An operation of Batch's API the queue does not emulate (compute
environments, container jobs, quota shares, tags) answers a ``ClientException`` saying so.
Errors go out as botocore reads rest-json ones: the code in ``x-amzn-ErrorType`` and ``__type``.
:attr:`BatchResponses.calls` counts the requests of each operation (refused ones too), for benchmarks.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from airflow_hetero.local.batch import validators
from airflow_hetero.local.batch.backend import BatchBackend
from airflow_hetero.local.batch.exceptions import BatchError, ClientException, ServerException, not_emulated

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], str], dict[str, Any]]


@functools.cache
def operations_by_path() -> dict[str, str]:
    """Every operation of botocore's ``batch`` model by its request path (``/v1/submitservicejob``)."""
    model = validators._model()
    return {model.operation_model(op).http["requestUri"]: op for op in model.operation_names}


class BatchResponses:
    """The emulated operations over one backend."""

    def __init__(self, backend: BatchBackend) -> None:
        b = backend
        self.calls: dict[str, int] = {}
        """Requests answered, by operation (``"?"`` for a path that is none)."""
        self._calls_lock = threading.Lock()
        self.handlers: dict[str, Handler] = {
            "CreateServiceEnvironment": b.create_service_environment,
            "DescribeServiceEnvironments": lambda body, _r: b.describe_service_environments(body),
            "UpdateServiceEnvironment": lambda body, _r: b.update_service_environment(body),
            "DeleteServiceEnvironment": lambda body, _r: b.delete_service_environment(body),
            "CreateJobQueue": b.create_job_queue,
            "DescribeJobQueues": lambda body, _r: b.describe_job_queues(body),
            "CreateSchedulingPolicy": b.create_scheduling_policy,
            "SubmitServiceJob": b.submit_service_job,
            "DescribeServiceJob": lambda body, _r: b.describe_service_job(body),
            "ListServiceJobs": lambda body, _r: b.list_service_jobs(body),
            "TerminateServiceJob": lambda body, _r: b.terminate_service_job(body),
            "UpdateServiceJob": lambda body, _r: b.update_service_job(body),
            "GetJobQueueSnapshot": lambda body, _r: b.get_job_queue_snapshot(body),
        }

    def call_counts(self) -> dict[str, int]:
        """A copy of :attr:`calls`."""
        with self._calls_lock:
            return dict(self.calls)

    def answer(self, method: str, path: str, raw: bytes, region: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON answer) of one request."""
        operation = operations_by_path().get(path.rstrip("/"))
        with self._calls_lock:
            self.calls[operation or "?"] = self.calls.get(operation or "?", 0) + 1
        try:
            if operation is None or method != "POST":
                raise ClientException(f"{method} {path} is not an operation of the Batch API")
            handler = self.handlers.get(operation)
            if handler is None:
                raise not_emulated(operation)
            body = _body(raw)
            validators.check_request(operation, body)
            return 200, validators.check_answer(operation, handler(body, region))
        except BatchError as err:
            return err.status, {"__type": err.code, "message": err.message}
        except Exception as exc:  # never a traceback for a client: Batch's own fault
            log.exception("Batch.%s failed", operation)
            fault = ServerException(f"Local endpoint error: {exc!r}")
            return fault.status, {"__type": fault.code, "message": fault.message}


def _body(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ClientException(f"The request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ClientException("The request body must be a JSON object")
    return body
