"""What the gateway tells its operators: Prometheus metrics (`metrics`, `metrics_files`), JSON
logs with the request id (`logjson`, `request_log`), what the calls log keeps of a model call,
noted on its way (`call_facts`), the redaction of secrets (`redact`, `logfilters`), and OpenTelemetry
traces when the standard OTEL_* variables ask for them (`tracing`, `request_spans`, `genai`, `task_spans`).

May import: `gateway.state` only."""
