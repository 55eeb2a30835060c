"""Health probes (gateway/ops/)."""
