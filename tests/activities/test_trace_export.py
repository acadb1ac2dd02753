"""With ``STATEKEEPER_OTEL_EXPORTER_OTLP_ENDPOINT`` set, the spans of a process reach that
OTLP/HTTP endpoint (``starter.runtime.telemetry``), named by ``STATEKEEPER_OTEL_SERVICE_NAME``. Run in a
child process: the tracer provider is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

CHILD = """
from settings import Settings
from starter.runtime.connection import connect_options
from starter.runtime.telemetry import tracer_provider

settings = Settings()
connect_options(settings)  # what every process does when it connects
provider = tracer_provider(settings)
with provider.get_tracer("test").start_as_current_span("one-turn"):
    pass
provider.force_flush()
"""


def collector() -> tuple[ThreadingHTTPServer, list[tuple[str, str, bytes]]]:
    received: list[tuple[str, str, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, received


def run_child(tmp_path: Path, endpoint: str) -> None:
    env = {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
           "STATEKEEPER_OTEL_SERVICE_NAME": "statekeeper-test"}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr


def test_spans_are_exported_to_the_configured_endpoint(tmp_path: Path):
    server, received = collector()
    try:
        run_child(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/v1/traces")
    finally:
        server.shutdown()
    [(path, content_type, body)] = received
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    request = ExportTraceServiceRequest.FromString(body)
    [resource_spans] = request.resource_spans
    attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert attributes["service.name"] == "statekeeper-test"
    assert [s.name for scope in resource_spans.scope_spans for s in scope.spans] == ["one-turn"]

