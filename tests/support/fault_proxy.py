"""A loopback HTTP proxy in front of a (moto) endpoint that injects faults per AWS action.

Each request's action is read from ``X-Amz-Target`` (``SageMaker.CreateTrainingJob``), or for a rest-json
service (AWS Batch: ``POST /v1/submitservicejob``) from its path, named as the operation (``SubmitServiceJob``). A test
queues faults per action; the next request of that action gets the first queued fault:

* ``"reset_before"``: close the connection without forwarding (the service never saw it);
* ``"reset_after"``: forward, then close the connection without an answer (the answer is lost);
* ``"500_after"``: forward, then answer HTTP 500 InternalFailure instead of the real answer;
* ``"timeout_after"``: forward, then hold the answer longer than the client's read timeout.

``sent[action]`` counts requests that arrived at the proxy, ``forwarded[action]`` those the
service received; ``log`` lists (epoch seconds, action) of each forwarded request, in order, as
it was answered, and ``answers`` the same with the service's answer body.
"""

from __future__ import annotations

import functools
import http.client
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FAULTS = ("reset_before", "reset_after", "500_after", "timeout_after")


class FaultProxy:
    """Forward to ``upstream``; inject queued faults; count what was sent and forwarded."""

    def __init__(self, upstream: str, hold_seconds: float = 3.0) -> None:
        self.upstream = urlsplit(upstream)
        self.hold_seconds = hold_seconds
        self.faults: dict[str, deque[str]] = {}
        self.sent: Counter[str] = Counter()
        self.forwarded: Counter[str] = Counter()
        self.log: list[tuple[float, str]] = []
        self.answers: list[tuple[float, str, bytes]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_POST(self) -> None:
                proxy.handle(self)

            do_GET = do_PUT = do_DELETE = do_HEAD = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def fail(self, action: str, *faults: str) -> None:
        """Queue ``faults`` for the next requests of ``action`` (e.g. ``CreateTrainingJob``)."""
        for fault in faults:
            if fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r}")
        with self._lock:
            self.faults.setdefault(action, deque()).extend(faults)

    def _next_fault(self, action: str) -> str | None:
        with self._lock:
            self.sent[action] += 1
            queue = self.faults.get(action)
            return queue.popleft() if queue else None

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        target = request.headers.get("X-Amz-Target") or ""
        action = target.rsplit(".", 1)[-1] if target else _rest_actions().get(request.path, request.command)
        fault = self._next_fault(action)
        if fault == "reset_before":
            request.close_connection = True
            request.connection.close()
            return
        conn = http.client.HTTPConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=30)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(request.command, request.path, body=body, headers=headers)
        answer = conn.getresponse()
        payload = answer.read()
        with self._lock:
            self.forwarded[action] += 1
            now = time.time()
            self.log.append((now, action))
            self.answers.append((now, action, payload))
        if fault == "reset_after":
            request.close_connection = True
            request.connection.close()
            return
        if fault == "timeout_after":
            time.sleep(self.hold_seconds)
            request.close_connection = True
            request.connection.close()
            return
        if fault == "500_after":
            data = json.dumps({"__type": "InternalFailure", "message": "We encountered an internal error."}).encode()
            request.send_response(500)
            request.send_header("Content-Type", "application/x-amz-json-1.1")
            request.send_header("Content-Length", str(len(data)))
            request.end_headers()
            request.wfile.write(data)
            return
        request.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                request.send_header(key, value)
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        request.wfile.write(payload)


@functools.cache
def _rest_actions() -> dict[str, str]:
    """AWS Batch's request paths -> operation names (botocore's model)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("batch")
    return {model.operation_model(op).http["requestUri"]: op for op in model.operation_names}


@contextmanager
def fault_proxy(upstream: str, hold_seconds: float = 3.0) -> Iterator[FaultProxy]:
    """A running :class:`FaultProxy` in front of ``upstream``."""
    proxy = FaultProxy(upstream, hold_seconds)
    # a short poll: shutdown() waits for serve_forever to notice (0.5 s by default, at every test's end)
    thread = threading.Thread(target=proxy.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.server.shutdown()
        proxy.server.server_close()
