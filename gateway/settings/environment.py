"""How the settings blocks read the environment. Each block's `from_env(env)` takes django-environ's `Env`
over the process environment, or over any mapping (a test's), and returns its settings: it reads, and
does nothing else (no folder made, no file written, nothing put in the environment: gateway/ops/process_start.py
does that when a process starts).

Every setting NAME may be given as NAME_FILE instead, the path of a file holding its value (a container's
or Kubernetes' secret mounted as a file, so that it is in no environment listing): django-environ's
`FileAwareEnv` reads it, the library's own answer to this, rather than a reading of ours beside each
setting. Its file is read as it is but for one final line break (`echo` and editors end a file with one;
no setting's value does), and a NAME_FILE naming no readable file is refused by name."""

from __future__ import annotations

import os
from collections.abc import Mapping

import environ
from django.core.exceptions import ImproperlyConfigured

Environment = environ.Env | Mapping[str, str] | None


class SecretFiles(environ.FileAwareMapping):
    """FileAwareMapping with the file's final line break taken off, and a clear refusal of a NAME_FILE
    that cannot be read (the library raises the bare OSError, which names the path but not the variable)."""

    def __getitem__(self, key):
        path = self.env.get(key + "_FILE")
        if not path:
            return super().__getitem__(key)
        try:
            value = super().__getitem__(key)
        except OSError as exc:
            raise ImproperlyConfigured(f"{key}_FILE names {path}, which cannot be read ({exc.strerror}).") from None
        return value.removesuffix("\n").removesuffix("\r")


def reader(environment: Environment = None) -> environ.Env:
    """`environment` as an `Env`: itself if it is one; a `FileAwareEnv` over the mapping otherwise (None: the
    process environment)."""
    if isinstance(environment, environ.Env):
        return environment
    env = environ.FileAwareEnv()
    env.ENVIRON = SecretFiles(os.environ if environment is None else environment)
    return env


def trimmed(items: list[str]) -> list[str]:
    """A comma list's entries trimmed, the empty ones dropped: django-environ keeps the space after a comma
    ("a, b" gives " b", a host or origin that never matches)."""
    return [item.strip() for item in items if item.strip()]
