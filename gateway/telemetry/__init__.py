"""What the gateway tells its operators: Prometheus metrics (`metrics`, `metrics_files`), JSON
logs with the request id (`logjson`, `request_log`), what the calls log keeps of a model call,
noted on its way (`call_facts`), and the redaction of secrets (`redact`, `logfilters`).

May import: `gateway.state` only."""
