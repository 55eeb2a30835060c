"""Settings of what the gateway tells its operators: the logs (text, or one JSON object per line) and the
Prometheus metrics (GET /metrics, docs/operations.md).

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader

# Seconds the scrape waits for the task broker when it reads the queue's length.
METRICS_BROKER_TIMEOUT_SECONDS = 2.0


def from_env(env: Environment = None, *, var_dir: Path) -> dict:
    env = reader(env)
    # `text` (the default) or `json`: one JSON object per line, with the request id of the request
    # (or of the request that queued a Celery task), and one line per request (gateway/telemetry/logjson.py).
    log_format = env.str("LOG_FORMAT", default="text").strip().lower()
    if log_format not in ("text", "json"):
        raise ImproperlyConfigured(f"LOG_FORMAT: {log_format!r} is neither 'text' nor 'json'.")
    return {
        "LOG_FORMAT": log_format,
        "LOGGING": logging(log_format, env.str("LOG_LEVEL", default="INFO")),
        # Every process (web workers, Celery) keeps its Prometheus values in files of this folder, which
        # the scrape adds up; gateway/telemetry/metrics_files.py makes it, and names it in the environment
        # for prometheus_client, when a process starts.
        "PROMETHEUS_MULTIPROC_DIR": Path(env.str("PROMETHEUS_MULTIPROC_DIR", default="") or var_dir / "metrics"),
        # A scrape must send `Authorization: Bearer <METRICS_TOKEN>`; empty: only loopback clients may scrape.
        "METRICS_TOKEN": env.str("METRICS_TOKEN", default=""),
        "METRICS_BROKER_TIMEOUT_SECONDS": METRICS_BROKER_TIMEOUT_SECONDS,
    }


def logging(log_format: str, level: str) -> dict:
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                       "json": {"()": "gateway.telemetry.logjson.JsonFormatter"}},
        # credentials out of every line written (gateway/telemetry/logfilters.py); the request id on each record
        "filters": {"redact_secrets": {"()": "gateway.telemetry.logfilters.RedactSecrets"},
                    "request_context": {"()": "gateway.telemetry.logjson.RequestContext"},
                    # a 501 (a feature the gateway does not provide) is the client's problem: django.request
                    # logs it at WARNING, not ERROR (gateway/telemetry/logfilters.py)
                    "not_implemented_is_warning": {"()": "gateway.telemetry.logfilters.NotImplementedIsWarning"}},
        "handlers": {"console": {"class": "logging.StreamHandler",
                                 "formatter": "json" if log_format == "json" else "plain",
                                 "filters": ["request_context", "redact_secrets"]}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"django.request": {"level": "ERROR", "filters": ["not_implemented_is_warning"]},
                    # the line per request: JSON logs only (the text logs have the server's access log)
                    "gateway.requests": {"level": "INFO" if log_format == "json" else "WARNING"},
                    # httpx logs each request's URL at INFO, and the Telegram bot token is part of its URLs;
                    # so does httpx2, the `mcp` client's HTTP library (an MCP server's URL may carry a token)
                    "httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}},
    }
