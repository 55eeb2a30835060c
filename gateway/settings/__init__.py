"""Settings: every value comes from the environment, with a default that works on a laptop.

Two tiers (docs/configuration.md): the operator settings, each listed with its default in `.env.example`;
and a few internal ones that only the tests and benchmarks turn. A value that cannot be parsed fails at
start-up with django-environ's message naming the variable.

What depends on the environment is `from_env(environment)`: a function of the environment it is given
(a mapping, or the process environment), made of the blocks of this package, each a `from_env` of its
own. It reads and does nothing else: the folders, the metrics folder in the environment and the embedded
default's secret key file are made when a process starts (gateway/ops/process_start.py). This module's
one effect is reading `.env` into the process environment (a variable already set wins), so that what it
sets reaches every reader of the environment (the OpenTelemetry and proxy variables, say).
"""

from pathlib import Path

import environ

from gateway.settings import (
    accounts,
    audit,
    batches,
    calls,
    console,
    database,
    deployment,
    files,
    native,
    redis,
    routines,
    service,
    sign_in,
    task_queue,
    telemetry,
    usage,
)
from gateway.settings.environment import Environment, reader

BASE_DIR = Path(__file__).resolve().parent.parent.parent

INSTALLED_APPS = [
    "unfold",  # the console's theme (gateway/settings/console.py); before the admin, whose templates it overrides
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_ratelimit",  # the admin login's limits (accounts/admin_login.py)
    "drf_spectacular_sidecar",  # Swagger UI's files for the API contract page (gateway/openapi/views.py)
    "auditlog",  # the console's audit trail (gateway/settings/audit.py); before gateway, whose admin shows it
    "gateway",
    "accounts",
    "native",
    "routines",
    "batches",  # bulk calls run by the batch queue's workers (batches/)
    "account_pages",  # the account holders' own pages at /account/ (no models)
    "admin_api",  # the administration API at /api/v1/admin/ (no models)
]

MIDDLEWARE = [
    "gateway.web.middleware.TrustedProxyMiddleware",  # X-Forwarded-* removed unless from TRUSTED_PROXIES
    "gateway.web.middleware.RequestIdMiddleware",
    "gateway.web.middleware.OutageMiddleware",  # 503 with Retry-After while PostgreSQL or Redis is down
    "gateway.web.surfaces.SurfaceMiddleware",
]
# The operator console's middleware, applied by SurfaceMiddleware to every path outside /v1 and /api.
CONSOLE_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "gateway.web.static_files.StaticFilesMiddleware",  # WhiteNoise's, async under ASGI (no sync-iterator warning)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "gateway.web.console_csrf.ConsoleCsrfMiddleware",  # CsrfViewMiddleware with its view step (why: there)
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "gateway.console.audit_trail.AuditActorMiddleware",  # the operator behind each audited change
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
# The admin's checks look for its middleware in MIDDLEWARE; it is in CONSOLE_MIDDLEWARE instead.
# So do `check --deploy`'s for the security, clickjacking and CSRF middleware: gateway/apps.py runs
# the deploy checks that depend on them again with CONSOLE_MIDDLEWARE in view (HSTS, redirect,
# cookies, ...). django_ratelimit.W001 only knows django-redis's cache class: Django's own RedisCache
# adds with SET NX and counts with INCR, and accounts.admin_login.CounterCache counts atomically too.
SILENCED_SYSTEM_CHECKS = ["admin.E408", "admin.E409", "admin.E410",
                          "security.W001", "security.W002", "security.W003", "django_ratelimit.W001"]

ROOT_URLCONF = "gateway.urls"
APPEND_SLASH = False
WSGI_APPLICATION = None
ASGI_APPLICATION = "gateway.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_USER_MODEL = "accounts.Account"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
WHITENOISE_USE_FINDERS = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Service --------------------------------------------------------------------------------
SERVICE_VERSION = "0.1.0"
API_VERSION = "v1"

SESSION_TOKEN_TTL_SECONDS = 86400  # spec 8.6, fixed
SESSION_TOKEN_REMEMBER_TTL_SECONDS = 2592000  # spec 8.6, fixed
API_KEY_TTL_DAYS = 365  # spec 2.1, fixed
LOGIN_LOCK_AFTER_FAILURES = 5  # spec 3.2, fixed
LOGIN_LOCK_SECONDS = 30 * 60  # spec 3.2, fixed

# Request ceilings per minute (spec 8.1): each ceiling's window (the ceilings, RATE_LIMITS, in service.py).
RATE_WINDOW_SECONDS = 60


def from_env(environment: Environment = None) -> dict:
    """Every setting that depends on the environment, from `environment` (a mapping, or the process
    environment when None): the blocks' settings in the order each needs the others'. Reads only."""
    env = reader(environment)
    # Where SQLite, the file broker, the spool, the metrics and the embedded default's secret key live.
    var_dir = Path(env.str("GATEWAY_VAR_DIR", default=str(BASE_DIR / "var")))
    # The console's static files, collected there by `collectstatic` (the container image collects them
    # into its own folder when it is built: Containerfile); WhiteNoise serves them, found in the apps
    # too (WHITENOISE_USE_FINDERS), so an install that never collects serves them all the same.
    static_root = Path(env.str("STATIC_ROOT", default=str(var_dir / "static")))
    found = {"VAR_DIR": var_dir, "STATIC_ROOT": static_root, **deployment.from_env(env)}
    # DATABASE_URL (SQLite in VAR_DIR without it), each process's connection pool, and what a pooler in
    # transaction mode in front of PostgreSQL needs (DATABASE_POOLER).
    found.update(database.from_env(env, var_dir=var_dir))
    found.update(deployment.secret_key(env, debug=found["DEBUG"], var_dir=var_dir, databases=found["DATABASES"]))
    found.update(redis.from_env(env))  # REDIS_URL, or the primary that Redis Sentinel names; the Django caches
    found.update(task_queue.from_env(env, var_dir=var_dir, redis=found))
    found.update(telemetry.from_env(env, var_dir=var_dir))
    found.update(usage.from_env(env, var_dir=var_dir))
    found.update(files.from_env(env, var_dir=var_dir))  # /v1/files: the largest file, STORAGES
    for block in (service, accounts, audit, batches, calls, console, native, routines, sign_in):
        found.update(block.from_env(env))
    return found


environ.Env.read_env(BASE_DIR / ".env", overwrite=False)  # .env into the process environment; what is set wins
vars().update(from_env())  # a FileAwareEnv over the process environment: NAME_FILE for any NAME
