"""What the gateway tells its operators: Prometheus metrics (`metrics`, `metrics_files`), JSON logs with
the request id (`logjson`), what the calls log keeps of a model call, noted on its way (`call_facts`), the
redaction of secrets and the level of a 501's line (`redact`, `logfilters`), and OpenTelemetry traces when
the standard OTEL_* variables ask for them (`tracing`, `request_spans`, `genai`, `task_spans`).

May import: `gateway.state` only."""
