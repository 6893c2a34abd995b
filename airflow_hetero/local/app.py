"""The endpoint's WSGI app: SageMaker training-job actions here, every other request to moto.

SageMaker speaks JSON 1.1: ``POST /`` with ``X-Amz-Target: SageMaker.<Action>`` and a JSON body;
errors are HTTP 4xx with ``{"__type": code, "message": text}``, which botocore and aiobotocore turn
into ``ClientError`` with that code. Everything else (S3, CloudWatch Logs, CloudWatch, IAM, STS,
other SageMaker actions) goes to moto's ``DomainDispatcherApplication``, the same app moto's own
server runs, which routes by the request's signing scope.

In front of both sits :class:`RequestGuard`: a request a web browser could send on a page's
behalf (it carries ``Origin`` or a cross-site ``Sec-Fetch-Site``, or names another ``Host``, as
after DNS rebinding) is refused with 403 before any handler or moto sees it, because any
``CreateTrainingJob`` that gets through runs a program as the user.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any
from xml.sax.saxutils import escape

from airflow_hetero.local.clients import DEFAULT_REGION
from airflow_hetero.local.errors import ServiceError
from airflow_hetero.local.service import TrainingService

log = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")
_CONTENT_TYPE = "application/x-amz-json-1.1"
#: Bind addresses meaning "every interface": any Host is accepted there (Origin is still refused).
ANY_ADDRESS = frozenset({"", "0.0.0.0", "::"})
#: Names of the loopback interface a local client may use for the endpoint's port.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: ``Sec-Fetch-Site`` values of requests a browser makes on its own or for a page of this endpoint.
_OWN_FETCH_SITES = frozenset({"none", "same-origin"})


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


def allowed_hosts(bind_host: str, port: int) -> frozenset[str]:
    """``Host`` header values that name an endpoint bound to ``bind_host``:``port``: the bind
    address and the loopback names, each with the port (and without it on port 80), lower case."""
    names: set[str] = set()
    for name in (bind_host.strip("[]"), *LOOPBACK_NAMES):
        host = f"[{name}]" if ":" in name else name
        names.add(f"{host}:{port}".lower())
        if port == 80:
            names.add(host.lower())
    return frozenset(names)


class RequestGuard:
    """Refuses (403) requests a web page could make the browser send, before ``app`` sees them.

    Refused: any request with an ``Origin`` header (browsers add it to cross-origin requests,
    CORS preflights and form posts; AWS SDKs never send it), any with a ``Sec-Fetch-Site`` other
    than ``none``/``same-origin`` (cross-site navigations and ``<img>`` loads, which carry no
    Origin), and, unless bound to every interface, any whose ``Host`` is not the bound address or
    a loopback name with the endpoint's port (DNS rebinding sends the attacker's host name).
    Until :meth:`bind` gives the port, every Host is refused. The ``Access-Control-*`` headers
    moto adds to every answer (``Access-Control-Allow-Origin: *``) are removed from what passes.
    """

    def __init__(self, app: WSGIApp, bind_host: str) -> None:
        self.app = app
        self.bind_host = bind_host
        self.any_host = bind_host in ANY_ADDRESS
        self.hosts: frozenset[str] = frozenset()

    def bind(self, port: int) -> None:
        """Accept the Host names of ``port`` (the bound port, known once the server is made)."""
        self.hosts = allowed_hosts(self.bind_host, port)

    def refusal(self, environ: dict[str, Any]) -> str | None:
        """Why ``environ`` is refused, or None to let it through."""
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None:
            return (
                f"requests from web pages (Origin: {origin}) are not accepted; "
                "the endpoint serves AWS SDK clients, which send no Origin header"
            )
        site = environ.get("HTTP_SEC_FETCH_SITE")
        if site is not None and site.lower() not in _OWN_FETCH_SITES:
            return f"requests a browser sends for another site (Sec-Fetch-Site: {site}) are not accepted"
        host = environ.get("HTTP_HOST", "")
        if not self.any_host and host.lower() not in self.hosts:
            names = ", ".join(sorted(self.hosts)) or "none yet"
            return f"Host {host!r} is not this endpoint's address (accepted: {names})"
        return None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        reason = self.refusal(environ)
        if reason is None:
            return self.app(environ, _without_cors(start_response))
        log.warning(
            "refused %s %s from %s: %s",
            environ.get("REQUEST_METHOD"),
            environ.get("PATH_INFO"),
            environ.get("REMOTE_ADDR"),
            reason,
        )
        message = f"Refused by the airflow-hetero local endpoint: {reason}."
        request_id = str(uuid.uuid4())
        if environ.get("HTTP_X_AMZ_TARGET"):  # JSON protocol: botocore reads __type and message
            data = json.dumps({"__type": "AccessDeniedException", "message": message}).encode("utf-8")
            content_type = _CONTENT_TYPE
        else:  # the query protocols (IAM, STS) and S3 both read this XML shape
            data = (
                "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
                f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
            ).encode()
            content_type = "application/xml"
        start_response(
            "403 Forbidden",
            [("Content-Type", content_type), ("Content-Length", str(len(data))), ("x-amzn-RequestId", request_id)],
        )
        return [data]


def _without_cors(start_response: Callable[..., Any]) -> Callable[..., Any]:
    """``start_response`` that drops ``Access-Control-*`` headers: no page may read an answer."""

    def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        kept = [(name, value) for name, value in headers if not name.lower().startswith("access-control-")]
        return start_response(status, kept, exc_info) if exc_info is not None else start_response(status, kept)

    return start
