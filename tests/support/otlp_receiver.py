"""An OTLP/HTTP trace receiver on 127.0.0.1 for the system test: every span Airflow's components export, kept.

Airflow (``[traces] otel_on``) exports with OpenTelemetry's OTLP/HTTP exporter (``OTEL_TRACES_EXPORTER=
otlp_proto_http``) to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: each POST to ``/v1/traces`` is an
``ExportTraceServiceRequest`` (protobuf), answered with an empty ``ExportTraceServiceResponse``.
"""

from __future__ import annotations

import gzip
import json
import threading
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: How long the server thread may take to stop.
STOP_TIMEOUT = 10


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span: its name, ids (hex), times (ns) and attributes."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


class OtlpReceiver:
    """Serve ``/v1/traces`` on a free port of 127.0.0.1 until :meth:`stop`; :attr:`spans` every span so far."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                    ExportTraceServiceRequest,
                    ExportTraceServiceResponse,
                )

                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.keep(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="otlp-receiver", daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        """``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def keep(self, request: Any) -> None:
        found = [
            ReceivedSpan(
                name=span.name,
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                parent_span_id=span.parent_span_id.hex(),
                start_ns=span.start_time_unix_nano,
                end_ns=span.end_time_unix_nano,
                attributes={a.key: _value(a.value) for a in span.attributes},
            )
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self.lock:
            self.spans.extend(found)

    def snapshot(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    def save(self, path: Path) -> None:
        """Every span so far as a JSON list of :class:`ReceivedSpan` fields (tests/support/trace_svg.py draws it)."""
        path.write_text(json.dumps([asdict(s) for s in self.snapshot()], indent=1))

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=STOP_TIMEOUT)
