"""The endpoint's spot control call: interrupt a running managed spot job, as EC2 taking the capacity back.

``POST /_airflow-hetero/interrupt`` with ``{"TrainingJobName": NAME}`` interrupts the job (see
:mod:`airflow_hetero.local.training.spot`) and answers ``{"TrainingJobName": ..., "SecondaryStatus": ...}``
(the status it had when asked). A job that is unknown, not managed spot or not InProgress answers 400
with ``{"__type": "ValidationException", "message": ...}``, as the capacity path does (:mod:`.control`).
:func:`interrupt_job` is the client, for a process other than the endpoint's.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_hetero.local.api.control import INTERRUPT_PATH, call
from airflow_hetero.local.api.errors import ServiceError, validation
from airflow_hetero.local.api.service import TrainingService

__all__ = ["INTERRUPT_PATH", "answer", "interrupt_job"]


def answer(service: TrainingService, method: str, raw: bytes) -> dict[str, Any]:
    """The answer to ``method`` on :data:`INTERRUPT_PATH` with body ``raw``; :class:`ServiceError` when refused."""
    if method != "POST":
        raise ServiceError("MethodNotAllowed", f"{INTERRUPT_PATH} answers POST, not {method}", 405)
    try:
        body = json.loads(raw or b"{}")
    except ValueError as exc:
        raise validation(f"The body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict) or set(body) != {"TrainingJobName"} or not isinstance(body["TrainingJobName"], str):
        raise validation(f'The body must be {{"TrainingJobName": NAME}}, not {body!r:.200}')
    return service.interrupt(body["TrainingJobName"])


def interrupt_job(url: str, job_name: str, *, timeout: float = 30.0) -> dict[str, Any]:
    """Interrupt spot job ``job_name`` on the endpoint at ``url``; ``ValueError`` with its message when refused."""
    return call(url, INTERRUPT_PATH, {"TrainingJobName": job_name}, "interruption", timeout=timeout)
