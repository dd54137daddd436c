"""An OTLP/HTTP trace receiver of the tests' own: not an OpenTelemetry Collector.

It serves ``POST /v1/traces`` on a loopback port, decodes each request body (protobuf, gzip or
not) with opentelemetry-proto's ``ExportTraceServiceRequest``, keeps the raw bodies and the
spans, and answers as OTLP/HTTP says (200 and an empty ``ExportTraceServiceResponse``). It does
what a collector's OTLP receiver does for one test's exporters, nothing more.
"""
import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

PATH = "/v1/traces"


class Span:
    """One received span: its ``scope`` (instrumentation scope name), ``service`` (resource's
    service.name), the protobuf ``span``, and its attributes as a dict."""

    def __init__(self, scope, service, span):
        self.scope = scope
        self.service = service
        self.span = span
        self.attributes = _attributes(span.attributes)

    @property
    def trace_id(self):
        return self.span.trace_id.hex()

    @property
    def span_id(self):
        return self.span.span_id.hex()

    @property
    def parent_id(self):
        return self.span.parent_span_id.hex()

    @property
    def name(self):
        return self.span.name

    def events(self):
        """[(name, time_unix_nano, attributes)] in the order sent."""
        return [(e.name, e.time_unix_nano, _attributes(e.attributes)) for e in self.span.events]


def _value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(pairs):
    return dict((pair.key, _value(pair.value)) for pair in pairs)


class Receiver:
    """``Receiver()`` listens at once; ``endpoint`` is its base URL; ``stop()`` ends it."""

    def __init__(self):
        self.bodies = []  # the decoded request bodies, as bytes
        self.spans = []
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != PATH:
                    self.send_error(404)
                    return
                request = ExportTraceServiceRequest.FromString(body)
                with lock:
                    receiver.bodies.append(body)
                    for resource_spans in request.resource_spans:
                        service = _attributes(resource_spans.resource.attributes).get("service.name")
                        for scope_spans in resource_spans.scope_spans:
                            receiver.spans.extend(Span(scope_spans.scope.name, service, span)
                                                  for span in scope_spans.spans)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
