"""How the settings blocks read the environment. Each block's `from_env(env)` takes django-environ's `Env`
over the process environment, or over any mapping (a test's), and returns its settings: it reads, and
does nothing else (no folder made, no file written, nothing put in the environment: gateway/ops/process_start.py
does that when a process starts)."""

from __future__ import annotations

from collections.abc import Mapping

import environ

Environment = environ.Env | Mapping[str, str] | None


def reader(environment: Environment = None) -> environ.Env:
    """`environment` as an `Env`: itself if it is one; one over the mapping otherwise (None: the
    process environment)."""
    if isinstance(environment, environ.Env):
        return environment
    env = environ.Env()
    if environment is not None:
        env.ENVIRON = environment
    return env


def trimmed(items: list[str]) -> list[str]:
    """A comma list's entries trimmed, the empty ones dropped: django-environ keeps the space after a comma
    ("a, b" gives " b", a host or origin that never matches)."""
    return [item.strip() for item in items if item.strip()]
