"""Settings of the files accounts upload (`/v1/files`): the largest file, how long a batch's output is kept, and
where files are stored.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own. The storage is Django's
STORAGES alias `files`: a folder under the var dir by default; with FILES_STORAGE=s3, S3-compatible object storage
through django-storages and boto3 (one bucket every host reads, so that any process serves any file). The
gateway/files room reads the alias and nothing else, so another backend is a configuration away.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import global_settings
from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader

# OpenAI's largest batch input file: 200 MB (its largest file of any purpose is 512 MB).
FILES_MAX_BYTES = 200 * 1024 * 1024
# How long a batch's output and error files are kept: 30 days, OpenAI's longest `expires_after`.
FILES_OUTPUT_EXPIRE_SECONDS = 30 * 24 * 3600
BACKENDS = ("local", "s3")


def from_env(env: Environment = None, *, var_dir: Path) -> dict:
    env = reader(env)
    kind = env.str("FILES_STORAGE", default="local")
    if kind not in BACKENDS:
        raise ImproperlyConfigured(f"FILES_STORAGE must be one of {', '.join(BACKENDS)}, not {kind!r}.")
    if kind == "s3":
        files = {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": {
            "bucket_name": env.str("FILES_S3_BUCKET", default=""),
            "endpoint_url": env.str("FILES_S3_ENDPOINT_URL", default="") or None,  # empty: AWS's own
            "region_name": env.str("FILES_S3_REGION", default="") or None,
            "access_key": env.str("FILES_S3_ACCESS_KEY_ID", default="") or None,  # empty: boto3's own chain
            "secret_key": env.str("FILES_S3_SECRET_ACCESS_KEY", default="") or None,
            "location": env.str("FILES_S3_PREFIX", default="files"),
            "file_overwrite": False,
            "default_acl": None,
            "querystring_auth": True,
            # a file read back is first downloaded whole into a spooled temporary file: past Django's in-memory
            # upload size it goes to disk (django-storages' default, 0, never leaves memory, so a 200 MB file
            # would be held in memory by every request reading it)
            "max_memory_size": global_settings.FILE_UPLOAD_MAX_MEMORY_SIZE,
        }}
        if not files["OPTIONS"]["bucket_name"]:
            raise ImproperlyConfigured("FILES_STORAGE=s3 needs FILES_S3_BUCKET.")
    else:
        files = {"BACKEND": "django.core.files.storage.FileSystemStorage",
                 "OPTIONS": {"location": str(Path(env.str("FILES_DIR", default=str(var_dir / "files"))))}}
    return {
        # The largest file `POST /v1/files` stores, in bytes (413 beyond it).
        "FILES_MAX_BYTES": env.int("FILES_MAX_BYTES", default=FILES_MAX_BYTES),
        # Seconds a batch's output and error files are kept after they are written; then they go as an
        # upload's `expires_after` makes it go.
        "FILES_OUTPUT_EXPIRE_SECONDS": env.int("FILES_OUTPUT_EXPIRE_SECONDS", default=FILES_OUTPUT_EXPIRE_SECONDS),
        "FILES_STORAGE": kind,
        "STORAGES": {
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
            "files": files,
        },
    }
