"""Metrics, JSON logs and redaction (gateway/telemetry/)."""
