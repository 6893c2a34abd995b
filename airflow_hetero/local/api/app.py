"""The endpoint's WSGI app: SageMaker training-job actions here, every other request to moto.

SageMaker speaks JSON 1.1: ``POST /`` with ``X-Amz-Target: SageMaker.<Action>`` and a JSON body;
errors are HTTP 4xx with ``{"__type": code, "message": text}``, which botocore and aiobotocore turn
into ``ClientError`` with that code. Everything else (S3, CloudWatch Logs, CloudWatch, IAM, STS,
other SageMaker actions) goes to moto's ``DomainDispatcherApplication``, the same app moto's own
server runs, which routes by the request's signing scope.

The endpoint's own control paths (``/_airflow-hetero/capacity``, :mod:`.control`, and
``/_airflow-hetero/interrupt``, :mod:`.spot_control`) read and change the instance capacity and quotas
and interrupt a spot job; no AWS client sends requests there.

The Price List Query API (``X-Amz-Target: AWSPriceListService.<Action>``: GetProducts,
DescribeServices) is answered here too, with stand-in prices (:mod:`.pricing`).

Requests signed for ``batch`` (rest-json, ``POST /v1/<operation>``) go to the offline queue,
:mod:`airflow_hetero.local.batch` (AWS Batch service jobs whose attempts are this endpoint's training jobs).

SageMaker actions this endpoint does not emulate are answered by moto where moto has them (models,
endpoints, ...); when moto fails or lacks one, or when it concerns training jobs (UpdateTrainingJob,
...), the answer is a 400 ``ValidationException`` naming the action, never a 5xx that clients
retry. Tag actions on training-job ARNs are answered here (:mod:`.tagging`).

:class:`BodyLimit` answers 413 to a request body over the endpoint's cap before reading any of it.

In front of both sits :class:`RequestGuard`: a request a web browser could send on a page's
behalf (it carries ``Origin`` or a cross-site ``Sec-Fetch-Site``, or names another ``Host``, as
after DNS rebinding) is refused with 403 before any handler or moto sees it, because any
``CreateTrainingJob`` that gets through runs a program as the user.
"""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any
from xml.sax.saxutils import escape

from airflow_hetero.local.api import control, iam, pricing, spot_control, tagging
from airflow_hetero.local.api.errors import ServiceError, validation
from airflow_hetero.local.api.service import TrainingService
from airflow_hetero.local.batch.responses import BatchResponses
from airflow_hetero.local.training.clients import DEFAULT_REGION

log = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")
_SERVICE_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/[a-z0-9-]+/([a-z0-9-]+)/")
_CONTENT_TYPE = "application/x-amz-json-1.1"
#: Bind addresses meaning "every interface": any Host is accepted there (Origin is still refused).
ANY_ADDRESS = frozenset({"", "0.0.0.0", "::"})
#: Names of the loopback interface a local client may use for the endpoint's port.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: ``Sec-Fetch-Site`` values of requests a browser makes on its own or for a page of this endpoint.
_OWN_FETCH_SITES = frozenset({"none", "same-origin"})
#: Default cap on a request body: 64 MiB (boto3 and the AWS CLI upload bigger files in 8 MiB parts).
MAX_REQUEST_BYTES = 64 * 1024 * 1024
#: How much of a refused body is read and dropped so the client sees the 413 (the rest is cut off).
DRAIN_BYTES = 1024 * 1024 * 1024
_TAG_ACTIONS = ("AddTags", "ListTags", "DeleteTags")
#: ``X-Amz-Target`` prefix of the Price List Query API (botocore's ``pricing`` targetPrefix).
PRICE_LIST_PREFIX = "AWSPriceListService"


def moto_app() -> WSGIApp:
    """moto's all-services server app (what ``moto_server`` serves)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app: WSGIApp = DomainDispatcherApplication(create_backend_app)
    return app


def signing_service(environ: dict[str, Any]) -> str | None:
    """The service a request was signed for (SigV4 credential scope), None when unsigned."""
    match = _SERVICE_SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    return match.group(1) if match else None


def request_region(environ: dict[str, Any]) -> str:
    """The region a request was signed for (SigV4 credential scope), us-east-1 when unsigned."""
    match = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    return match.group(1) if match else DEFAULT_REGION


class EndpointApp:
    """Dispatches ``SageMaker.<training-job action>`` to the service, the rest to ``fallback``."""

    def __init__(self, service: TrainingService, fallback: WSGIApp, batch: BatchResponses | None = None) -> None:
        self.service = service
        self.fallback = fallback
        self.batch = batch
        store = service.store
        self.actions: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
            "CreateTrainingJob": service.create,
            "DescribeTrainingJob": lambda body, _region: service.describe(body),
            "StopTrainingJob": lambda body, _region: service.stop(body),
            "ListTrainingJobs": lambda body, _region: service.list(body),
            "AddTags": lambda body, _region: tagging.add_tags(store, body),
            "ListTags": lambda body, _region: tagging.list_tags(store, body),
            "DeleteTags": lambda body, _region: tagging.delete_tags(store, body),
        }

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "").startswith(control.PREFIX):
            return self._control(environ, start_response)
        prefix, _, action = environ.get("HTTP_X_AMZ_TARGET", "").partition(".")
        if prefix == PRICE_LIST_PREFIX:
            return self._pricing(action, environ, start_response)
        if not prefix and signing_service(environ) == "iam" and environ.get("REQUEST_METHOD") == "POST":
            return self._iam(environ, start_response)
        if not prefix and self.batch is not None and signing_service(environ) == "batch":
            return self._batch(self.batch, environ, start_response)
        if prefix != "SageMaker":
            return self.fallback(environ, start_response)
        try:
            body = self._body(environ)
            handler = self._handler(action, body)
            if handler is None:
                return self._moto_sagemaker(action, body, environ, start_response)
            status, payload = 200, handler(body, request_region(environ))
        except ServiceError as err:
            status, payload = err.status, {"__type": err.code, "message": err.message}
        except Exception as exc:
            log.exception("SageMaker.%s failed", action)
            status, payload = 500, {"__type": "InternalFailure", "message": f"Local endpoint error: {exc!r}"}
        return _json_answer(start_response, status, payload)

    def _pricing(self, action: str, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The Price List Query API's ``action`` (:mod:`.pricing`: local stand-in prices)."""
        try:
            handler = pricing.ACTIONS.get(action)
            if handler is None:
                raise ServiceError(
                    "InvalidParameterException", f"{PRICE_LIST_PREFIX}.{action} is not emulated by the local endpoint"
                )
            status, payload = 200, handler(self._body(environ))
        except ServiceError as err:
            status, payload = err.status, {"__type": err.code, "message": err.message}
        return _json_answer(start_response, status, payload)

    def _batch(
        self, batch: BatchResponses, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """The offline queue's answer (rest-json: the error code also in ``x-amzn-ErrorType``)."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
        status, payload = batch.answer(method, path, raw, request_region(environ))
        error_type = [] if status == 200 else [("x-amzn-ErrorType", str(payload["__type"]))]
        return _json_answer(start_response, status, payload, content_type="application/json", headers=error_type)

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The endpoint's own control paths (:mod:`.control`: capacity and quotas; :mod:`.spot_control`: interrupt)."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            if environ["PATH_INFO"] == control.INTERRUPT_PATH:
                status, payload = 200, spot_control.answer(self.service, method, raw)
            else:
                status, payload = 200, control.answer(self.service.capacity, environ["PATH_INFO"], method, raw)
        except ServiceError as err:
            status, payload = err.status, {"__type": err.code, "message": err.message}
        return _json_answer(start_response, status, payload)

    def _iam(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """IAM actions answered here (:mod:`.iam`); the others go to moto with the body put back."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        action, form = iam.form_action(raw)
        if action not in iam.ACTIONS:
            environ = {**environ, "wsgi.input": io.BytesIO(raw), "CONTENT_LENGTH": str(len(raw))}
            return self.fallback(environ, start_response)
        try:
            data = iam.answer(action, form)
        except ServiceError as err:
            return _error_answer(environ, start_response, f"{err.status} Bad Request", err.code, err.message)
        start_response(
            "200 OK",
            [("Content-Type", "text/xml"), ("Content-Length", str(len(data))), ("x-amzn-RequestId", str(uuid.uuid4()))],
        )
        return [data]

    def _handler(self, action: str, body: dict[str, Any]) -> Callable[[dict[str, Any], str], dict[str, Any]] | None:
        """This endpoint's handler of ``action``; None for moto. Training-job actions it lacks are refused."""
        if action in _TAG_ACTIONS:
            return self.actions[action] if tagging.training_job_of(body.get("ResourceArn")) else None
        handler = self.actions.get(action)
        if handler is None and "TrainingJob" in action:
            raise not_emulated(action, "training jobs are run by this endpoint, which has no such action")
        return handler

    def _moto_sagemaker(
        self, action: str, body: dict[str, Any], environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """moto's answer to SageMaker ``action``, or a 400 naming the action when moto fails (5xx or error)."""
        raw = json.dumps(body).encode("utf-8")
        environ = {**environ, "wsgi.input": io.BytesIO(raw), "CONTENT_LENGTH": str(len(raw))}
        captured: list[Any] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], Any]:
            captured[:] = [status, headers]
            return lambda _data: None

        try:
            answer = b"".join(self.fallback(environ, capture))
        except Exception as exc:
            log.warning("moto failed on SageMaker.%s: %r", action, exc)
            captured = []
        if not captured or captured[0].startswith("5"):
            err = not_emulated(action, "neither this endpoint nor moto can answer it")
            return _json_answer(start_response, err.status, {"__type": err.code, "message": err.message})
        start_response(captured[0], captured[1])
        return [answer]

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


def not_emulated(action: str, why: str) -> ServiceError:
    """The 400 answer to a SageMaker action the local endpoint does not emulate."""
    return validation(f"SageMaker.{action} is not emulated by the airflow-hetero local endpoint ({why}).")


def _json_answer(
    start_response: Callable[..., Any],
    status: int,
    payload: dict[str, Any],
    *,
    content_type: str = _CONTENT_TYPE,
    headers: Iterable[tuple[str, str]] = (),
) -> Iterable[bytes]:
    """``payload`` as JSON with ``status`` (its reason phrase), a request id and ``headers``."""
    data = json.dumps(payload).encode("utf-8")
    reasons = {
        200: "OK",
        400: "Bad Request",
        404: "Not Found",
        405: "Method Not Allowed",
        413: "Content Too Large",
        500: "Internal Server Error",
    }
    reason = reasons.get(status, "Error")
    start_response(
        f"{status} {reason}",
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(data))),
            ("x-amzn-RequestId", str(uuid.uuid4())),
            *headers,
        ],
    )
    return [data]


def _error_answer(
    environ: dict[str, Any], start_response: Callable[..., Any], status: str, code: str, message: str
) -> Iterable[bytes]:
    """An error in the protocol of the request: JSON for ``X-Amz-Target`` ones, AWS's XML for the rest."""
    request_id = str(uuid.uuid4())
    if environ.get("HTTP_X_AMZ_TARGET"):  # JSON protocol: botocore reads __type and message
        data = json.dumps({"__type": code, "message": message}).encode("utf-8")
        content_type = _CONTENT_TYPE
    else:  # the query protocols (IAM, STS) and S3 both read this XML shape
        data = (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{escape(code)}</Code>"
            f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        ).encode()
        content_type = "application/xml"
    start_response(
        status,
        [("Content-Type", content_type), ("Content-Length", str(len(data))), ("x-amzn-RequestId", request_id)],
    )
    return [data]


class BodyLimit:
    """Answers 413 to a request whose body exceeds ``max_bytes``, without reading it into memory.

    A declared ``Content-Length`` over the cap is refused without keeping any of it; a chunked body
    is read up to the cap and refused as soon as it goes beyond. The rest of the body is read and
    dropped in 1 MiB pieces (up to ``DRAIN_BYTES``) so that the client, which may already be sending
    it after the server's ``100 Continue``, reads the 413 instead of a reset connection; then the
    connection is closed.
    """

    def __init__(self, app: WSGIApp, max_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        declared = environ.get("CONTENT_LENGTH")
        try:
            length = int(declared) if declared else None
        except ValueError:
            length = None
        if length is not None and length > self.max_bytes:
            return self._refuse(environ, start_response, f"{length} bytes", min(length, DRAIN_BYTES))
        if length is None and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            data = environ["wsgi.input"].read(self.max_bytes + 1)
            if len(data) > self.max_bytes:
                return self._refuse(environ, start_response, f"more than {self.max_bytes} bytes", DRAIN_BYTES)
            environ = {**environ, "wsgi.input": io.BytesIO(data), "CONTENT_LENGTH": str(len(data))}
        return self.app(environ, start_response)

    def _refuse(
        self, environ: dict[str, Any], start_response: Callable[..., Any], size: str, drain: int
    ) -> Iterable[bytes]:
        log.warning("refused a %s request body to %s", size, environ.get("PATH_INFO"))
        _drain(environ["wsgi.input"], drain)  # the server's input may be the socket itself: never read past the body
        message = (
            f"The request body ({size}) exceeds the airflow-hetero local endpoint's limit of {self.max_bytes} "
            "bytes. Upload large objects in parts (boto3 upload_file and the AWS CLI do), or start the endpoint "
            "with a higher --max-request-bytes."
        )
        return _error_answer(
            environ, _closing(start_response), "413 Content Too Large", "RequestEntityTooLarge", message
        )


def _drain(stream: Any, limit: int) -> None:
    """Read and drop up to ``limit`` bytes of ``stream`` in 1 MiB pieces."""
    left = limit
    while left > 0:
        try:
            piece = stream.read(min(left, 1 << 20))
        except (OSError, ValueError):
            return
        if not piece:
            return
        left -= len(piece)


def _closing(start_response: Callable[..., Any]) -> Callable[..., Any]:
    """``start_response`` that adds ``Connection: close`` (the unread body must not be parsed as a request)."""

    def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        return start_response(status, [*headers, ("Connection", "close")])

    return start


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
        json_protocol = bool(environ.get("HTTP_X_AMZ_TARGET"))
        code = "AccessDeniedException" if json_protocol else "AccessDenied"
        return _error_answer(environ, start_response, "403 Forbidden", code, message)


def _without_cors(start_response: Callable[..., Any]) -> Callable[..., Any]:
    """``start_response`` that drops ``Access-Control-*`` headers: no page may read an answer."""

    def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        kept = [(name, value) for name, value in headers if not name.lower().startswith("access-control-")]
        return start_response(status, kept, exc_info) if exc_info is not None else start_response(status, kept)

    return start
