"""What the gateway tells its operators: Prometheus metrics (`metrics`, `metrics_files`), JSON
logs with the request id (`logjson`, `request_log`), and the redaction of secrets from both
(`redact`, `logfilters`).

May import: `gateway.state` only."""
