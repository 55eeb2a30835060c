"""What every process of the gateway does once, when Django is set up (gateway/apps.py `ready`): the
settings only compute values (gateway/settings/), and what they name is made here, on disk and in the
environment, before the process serves, runs a task or a command.

- The folders it writes in: GATEWAY_VAR_DIR (SQLite, beat's schedule file), the static files' folder
  (WhiteNoise warns of a missing one), and the file broker's folders of the embedded default (kombu
  does not make them).
- The metrics folder, and PROMETHEUS_MULTIPROC_DIR in the environment: prometheus_client reads it there
  (gateway/telemetry/metrics.py sets it too, before its first import), and the processes this one starts
  inherit it.
- The embedded default's secret key: without SECRET_KEY, on SQLite, the settings name the file that keeps
  it (SECRET_KEY_FILE: GATEWAY_VAR_DIR/secret-key, or the operator's SECRET_KEY_FILE when that file is not
  there yet); the first process of the install makes it, every process reads it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings

# The file broker's folders (gateway/settings/task_queue.py) that kombu reads or writes.
BROKER_FOLDERS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")


def prepare() -> None:
    make_folders()
    open_metrics_folder()
    take_kept_secret_key()


def make_folders() -> None:
    Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        for folder in BROKER_FOLDERS:
            Path(options[folder]).mkdir(parents=True, exist_ok=True)


def open_metrics_folder() -> None:
    """Made, and named in this process's environment (and so its children's)."""
    Path(settings.PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(settings.PROMETHEUS_MULTIPROC_DIR)


def take_kept_secret_key() -> None:
    """SECRET_KEY from the file the settings name, when they name one (and no key was set)."""
    if settings.SECRET_KEY_FILE:
        settings.SECRET_KEY = kept_secret_key(Path(settings.SECRET_KEY_FILE))


def kept_secret_key(path: Path) -> str:
    """The key kept in `path` (mode 0600), made once: the first process to start writes it, every
    process of the install (and every later one) reads the same."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".secret-key.{os.getpid()}")
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(secrets.token_urlsafe(50))
        try:
            os.link(draft, path)  # atomic: the first process to start wins, the others read its key
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()
