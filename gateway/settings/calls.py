"""Settings of the calls log (gateway/usage/call_log.py): how long each call's row is kept,
and, for the groups that keep the prompt and the reply (`AccountGroup.capture_calls`, off by
default), how long and how much of them.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader


def from_env(env: Environment = None) -> dict:
    env = reader(env)
    found = {
        # Days a call's row (time, account, model, status, latency, the chain tried...) is kept; older rows are
        # deleted by the beat task `sweep-call-log` (hourly).
        "CALL_LOG_RETENTION_DAYS": env.int("CALL_LOG_RETENTION_DAYS", default=30),
        # Days the prompt and reply text of a group that keeps them are kept (the call's row stays longer).
        "CALL_CAPTURE_RETENTION_DAYS": env.int("CALL_CAPTURE_RETENTION_DAYS", default=7),
        # Most bytes (UTF-8) kept of each of a call's prompt and reply; the rest is cut off and the cut marked.
        "CALL_CAPTURE_MAX_BYTES": env.int("CALL_CAPTURE_MAX_BYTES", default=64 * 1024),
    }
    if found["CALL_LOG_RETENTION_DAYS"] < 1 or found["CALL_CAPTURE_RETENTION_DAYS"] < 1:
        raise ImproperlyConfigured("CALL_LOG_RETENTION_DAYS and CALL_CAPTURE_RETENTION_DAYS must be at least 1.")
    if found["CALL_CAPTURE_MAX_BYTES"] < 256:
        raise ImproperlyConfigured("CALL_CAPTURE_MAX_BYTES must be at least 256.")
    return found
