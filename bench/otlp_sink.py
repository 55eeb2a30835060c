"""A stand-in OTLP/HTTP collector for the hot-path benchmark with traces on (bench/gateway_latency.py
--otlp-sink; bench/README.md, "Issue 27: traces off and on")."""

from __future__ import annotations


class OtlpSink:
    """A stand-in OTLP/HTTP collector on loopback, in a thread of this process: every `POST /v1/traces` is
    read, counted (posts and bytes) and discarded, and answered 200 with an empty body (an empty
    ExportTraceServiceResponse). Anything else is answered 404. `env()` points a process's OpenTelemetry
    SDK at it."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        sink = self
        self.posts = self.bytes = self.refused = 0
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a collector's

            def do_POST(self):  # noqa: N802 - http.server's name
                left = int(self.headers.get("Content-Length") or 0)
                got = 0
                while left > 0:  # read and drop
                    chunk = self.rfile.read(min(left, 1 << 16))
                    if not chunk:
                        break
                    got += len(chunk)
                    left -= len(chunk)
                ok = self.path == "/v1/traces"
                with sink._lock:
                    if ok:
                        sink.posts += 1
                        sink.bytes += got
                    else:
                        sink.refused += 1
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="otlp-sink", daemon=True)
        self._thread.start()

    def env(self, service: str = "bench-gateway") -> dict[str, str]:
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{self.port}", "OTEL_TRACES_SAMPLER": "always_on",
                "OTEL_SERVICE_NAME": service}

    def summary(self) -> str:
        with self._lock:
            return (f"OTLP sink on 127.0.0.1:{self.port}: {self.posts} export posts to /v1/traces, {self.bytes:,} bytes"
                    + (f" ({self.refused} other requests refused)" if self.refused else ""))

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
