"""The endpoint's WSGI app: SageMaker training-job actions here, every other request to moto.

SageMaker speaks JSON 1.1: ``POST /`` with ``X-Amz-Target: SageMaker.<Action>`` and a JSON body;
errors are HTTP 4xx with ``{"__type": code, "message": text}``, which botocore and aiobotocore turn
into ``ClientError`` with that code. Everything else (S3, CloudWatch Logs, CloudWatch, IAM, STS,
other SageMaker actions) goes to moto's ``DomainDispatcherApplication``, the same app moto's own
server runs, which routes by the request's signing scope.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from airflow_hetero.local.clients import DEFAULT_REGION
from airflow_hetero.local.errors import ServiceError
from airflow_hetero.local.service import TrainingService

log = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")
_CONTENT_TYPE = "application/x-amz-json-1.1"


def moto_app() -> WSGIApp:
    """moto's all-services server app (what ``moto_server`` serves)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app: WSGIApp = DomainDispatcherApplication(create_backend_app)
    return app


def request_region(environ: dict[str, Any]) -> str:
    """The region a request was signed for (SigV4 credential scope), us-east-1 when unsigned."""
    match = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    return match.group(1) if match else DEFAULT_REGION


class EndpointApp:
    """Dispatches ``SageMaker.<training-job action>`` to the service, the rest to ``fallback``."""

    def __init__(self, service: TrainingService, fallback: WSGIApp) -> None:
        self.service = service
        self.fallback = fallback
        self.actions: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
            "CreateTrainingJob": service.create,
            "DescribeTrainingJob": lambda body, _region: service.describe(body),
            "StopTrainingJob": lambda body, _region: service.stop(body),
            "ListTrainingJobs": lambda body, _region: service.list(body),
        }

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        prefix, _, action = environ.get("HTTP_X_AMZ_TARGET", "").partition(".")
        handler = self.actions.get(action) if prefix == "SageMaker" else None
        if handler is None:
            return self.fallback(environ, start_response)
        try:
            body = self._body(environ)
            status, payload = 200, handler(body, request_region(environ))
        except ServiceError as err:
            status, payload = err.status, {"__type": err.code, "message": err.message}
        except Exception as exc:
            log.exception("SageMaker.%s failed", action)
            status, payload = 500, {"__type": "InternalFailure", "message": f"Local endpoint error: {exc!r}"}
        data = json.dumps(payload).encode("utf-8")
        reason = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}.get(status, "Error")
        start_response(
            f"{status} {reason}",
            [
                ("Content-Type", _CONTENT_TYPE),
                ("Content-Length", str(len(data))),
                ("x-amzn-RequestId", str(uuid.uuid4())),
            ],
        )
        return [data]

    @staticmethod
    def _body(environ: dict[str, Any]) -> dict[str, Any]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        raw = environ["wsgi.input"].read(length) if length else b""
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise ServiceError("SerializationException", f"Request body is not valid JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise ServiceError("SerializationException", "Request body must be a JSON object")
        return body
