"""Settings: every value comes from the environment, with a default that works on a laptop.

Each variable is listed, with a one-line comment, in `.env.example`. A value that cannot be
parsed fails at start-up with django-environ's message naming the variable.
"""

import ipaddress
import os
import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env.str("GATEWAY_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env.bool("DEBUG", default=False)
# SECRET_KEY: see "Secret key" below (after DATABASES, on which its default depends).
# Comma lists: django-environ keeps the space after a comma ("a, b" gives " b", a host or origin that
# never matches), so each entry is trimmed and empty ones dropped.
ALLOWED_HOSTS = [h.strip() for h in env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
                 if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in env.list("CSRF_TRUSTED_ORIGINS", default=[]) if o.strip()]

# --- Deployment: https, cookies, proxies (docs/decisions.md) ---------------------------------
# Proxies (addresses or CIDRs, comma list; "unix" for one on a Unix socket) whose X-Forwarded-For
# and X-Forwarded-Proto are believed. From any other peer those headers are removed before
# anything reads them (gateway.web.middleware.TrustedProxyMiddleware, first in MIDDLEWARE); the client
# is the last X-Forwarded-For hop that is not one of these proxies (gateway/limits/ratelimit.py).
TRUSTED_PROXIES = [proxy.strip() for proxy in env.list("TRUSTED_PROXIES", default=[]) if proxy.strip()]
for _proxy in TRUSTED_PROXIES:
    try:
        _proxy == "unix" or ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"TRUSTED_PROXIES: {_proxy!r} is not an address, a CIDR or 'unix'.") from None
if env.str("TRUSTED_PROXY_COUNT", default="") not in ("", "0"):
    raise ImproperlyConfigured("TRUSTED_PROXY_COUNT is replaced by TRUSTED_PROXIES: list the addresses (or "
                               "CIDRs) of the proxies in front, e.g. TRUSTED_PROXIES=10.0.0.0/8, and unset "
                               "TRUSTED_PROXY_COUNT.")
# Believed only when the peer is one of TRUSTED_PROXIES (the header is removed otherwise).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Spec 5.1.4: plain http is redirected to https in production.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
# Prometheus scrapes the pods over plain http: /metrics is never redirected (docs/operations.md).
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
# Strict-Transport-Security on https answers: seconds (0: not sent), subdomains, preload list.
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# The console's session and CSRF cookies only over https; both follow SECURE_SSL_REDIRECT unless set.
# (An empty value, as in .env.example, counts as unset.)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE") if env.str("SESSION_COOKIE_SECURE", "") \
    else SECURE_SSL_REDIRECT
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE") if env.str("CSRF_COOKIE_SECURE", "") else SECURE_SSL_REDIRECT

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
    "django.middleware.csrf.CsrfViewMiddleware",
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

# DATABASE_URL (SQLite in VAR_DIR without it), each process's connection pool, and what a pooler in
# transaction mode in front of PostgreSQL needs (DATABASE_POOLER): gateway/settings/database.py.
from gateway.settings.database import databases  # noqa: E402

DATABASES = databases(VAR_DIR)

# --- Secret key -----------------------------------------------------------------------------
# SECRET_KEY from the environment. Without it, the embedded default (SQLite: one host) makes a
# random key once and keeps it in GATEWAY_VAR_DIR/secret-key (mode 0600), which every process of
# the install reads; on PostgreSQL every host must share one key, so it must be set. With DEBUG
# off the service refuses to start with no key, the development key, a key shorter than 50
# characters, or one `check --deploy` calls weak (fewer than 5 distinct characters).
DEVELOPMENT_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SECRET_KEY = env.str("SECRET_KEY", default="")


def _kept_secret_key(path: Path) -> str:
    if not path.exists():
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


if not SECRET_KEY and DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    SECRET_KEY = _kept_secret_key(VAR_DIR / "secret-key")
if not SECRET_KEY and DEBUG:
    SECRET_KEY = DEVELOPMENT_SECRET_KEY
if not DEBUG:
    _key_problem = (
        "is not set" if not SECRET_KEY
        else "is the development default" if SECRET_KEY == DEVELOPMENT_SECRET_KEY
        else f"is {len(SECRET_KEY)} characters long, fewer than 50" if len(SECRET_KEY) < 50
        else "is too weak (fewer than 5 distinct characters, or Django's insecure prefix)"
        if len(set(SECRET_KEY)) < 5 or SECRET_KEY.startswith("django-insecure-")
        else ""
    )
    if _key_problem:
        raise ImproperlyConfigured(
            f"SECRET_KEY {_key_problem}, and DEBUG is off: refusing to start. Set SECRET_KEY in the "
            "environment (or .env) to a random value of 50 or more characters, the same on every host, "
            "for example the output of: python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )

from gateway.settings.redis import *  # noqa: E402,F403  REDIS_URL, or the primary that Redis Sentinel names

# Counters live in the cache without Redis. Culling at Django's default of 300 entries would
# drop live request windows and duplicate marks; past 100000 it removes the expired ones first.
EMBEDDED_CACHE = {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "gateway_cache",
                  "OPTIONS": {"MAX_ENTRIES": 100_000}}
if REDIS_URL:  # noqa: F405
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,  # noqa: F405
                          "OPTIONS": REDIS_CACHE_OPTIONS}}  # noqa: F405
else:
    CACHES = {"default": EMBEDDED_CACHE}
# django-ratelimit's counts (the admin login, accounts/admin_login.py), beside the counters ("gw:").
# Without Redis, the database cache with an atomic add and increment (E003 refuses the plain one).
CACHES["ratelimit"] = {**CACHES["default"], "KEY_PREFIX": "gw"}
if not REDIS_URL:  # noqa: F405
    CACHES["ratelimit"]["BACKEND"] = "accounts.admin_login.CounterCache"
RATELIMIT_USE_CACHE = "ratelimit"

AUTH_USER_MODEL = "accounts.Account"
PASSWORD_HASHERS = env.list(
    "PASSWORD_HASHERS",
    default=[
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    ],
)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Largest request body the JSON endpoints read; larger bodies are answered 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("MAX_REQUEST_BODY_BYTES", default=10 * 1024 * 1024)

EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
vars().update(EMAIL_CONFIG)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="gateway@localhost")

# --- Celery -------------------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_BROKER_URL or "filesystem://")  # noqa: F405
CELERY_BROKER_TRANSPORT_OPTIONS = (
    (REDIS_BROKER_TRANSPORT_OPTIONS if CELERY_BROKER_URL.startswith("sentinel://") else {})  # noqa: F405
    if not CELERY_BROKER_URL.startswith("filesystem://")
    else {
        "data_folder_in": str(VAR_DIR / "broker"),
        "data_folder_out": str(VAR_DIR / "broker"),
        "processed_folder": str(VAR_DIR / "broker-processed"),
        "control_folder": str(VAR_DIR / "broker-control"),  # else ./control, in the working folder
        "store_processed": False,
    }
)
CELERY_TASK_IGNORE_RESULT = True
# No result backend (the "disabled" one), built once for every thread: Celery otherwise builds it again in each
# new thread, reading the installed packages' entry points, and a web process enqueues from a thread per request
# (a quarter of the webhook ingest's CPU, bench/README.md).
CELERY_RESULT_BACKEND_THREAD_SAFE = True
# The web process's garbage collector (gateway/asgi.py): what is loaded at start is frozen, and these thresholds
# replace Python's (700, 10, 10). Empty: Python's defaults, nothing frozen.
GC_THRESHOLDS = tuple(env.list("GC_THRESHOLDS", cast=int, default=[50_000, 20, 100]))
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker outlives any broker outage: it keeps reconnecting (Celery's default gives up, and exits,
# after 100 tries). Celery is pinned to 5.6.3: 5.7.0 exits on a Redis restart
# (docs/decisions.md, "Celery is pinned to 5.6.3").
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Runs in flight when the broker goes away finish their model call (a run never calls it twice).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False

# --- Service --------------------------------------------------------------------------------
SERVICE_VERSION = "0.1.0"
API_VERSION = "v1"

SESSION_TOKEN_TTL_SECONDS = 86400  # spec 8.6, fixed
SESSION_TOKEN_REMEMBER_TTL_SECONDS = 2592000  # spec 8.6, fixed
API_KEY_TTL_DAYS = 365  # spec 2.1, fixed
LOGIN_LOCK_AFTER_FAILURES = 5  # spec 3.2, fixed
LOGIN_LOCK_SECONDS = 30 * 60  # spec 3.2, fixed

# Request ceilings per minute (spec 8.1). The spec's defaults; an operator may change them.
RATE_WINDOW_SECONDS = 60
RATE_LIMITS = {
    "v1": env.int("RATE_LIMIT_V1", default=20),
    "chat": env.int("RATE_LIMIT_CHAT", default=60),
    "agent_chat": env.int("RATE_LIMIT_AGENT_CHAT", default=20),
    "agent_run": env.int("RATE_LIMIT_AGENT_RUN", default=5),
    "embeddings": env.int("RATE_LIMIT_EMBEDDINGS", default=30),
    "profiles": env.int("RATE_LIMIT_PROFILES", default=60),
    "version": env.int("RATE_LIMIT_VERSION", default=60),
    "conversation_purge": env.int("RATE_LIMIT_CONVERSATION_PURGE", default=20),
    "login": env.int("RATE_LIMIT_LOGIN", default=10),
    "collection_write": env.int("RATE_LIMIT_COLLECTION_WRITE", default=30),
    "collection_search": env.int("RATE_LIMIT_COLLECTION_SEARCH", default=60),
    "collection_reindex": env.int("RATE_LIMIT_COLLECTION_REINDEX", default=6),
    "general": env.int("RATE_LIMIT_GENERAL", default=300),
    "hooks": env.int("RATE_LIMIT_HOOKS", default=120),
}

# Operator account made on the first start of `bin/serve` (embedded defaults).
OPERATOR_EMAIL = env.str("OPERATOR_EMAIL", default="operator@localhost")

# `text` (the default) or `json`: one JSON object per line, with the request id of the request
# (or of the request that queued a Celery task), and one line per request (gateway/telemetry/logjson.py).
LOG_FORMAT = env.str("LOG_FORMAT", default="text").strip().lower()
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT: {LOG_FORMAT!r} is neither 'text' nor 'json'.")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                   "json": {"()": "gateway.telemetry.logjson.JsonFormatter"}},
    # credentials out of every line written (gateway/telemetry/logfilters.py); the request id on each record
    "filters": {"redact_secrets": {"()": "gateway.telemetry.logfilters.RedactSecrets"},
                "request_context": {"()": "gateway.telemetry.logjson.RequestContext"},
                # a 501 (a feature the gateway does not provide) is the client's problem: django.request
                # logs it at WARNING, not ERROR (gateway/telemetry/request_log.py)
                "not_implemented_is_warning": {"()": "gateway.telemetry.request_log.NotImplementedIsWarning"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json" if LOG_FORMAT == "json" else "plain",
                             "filters": ["request_context", "redact_secrets"]}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.request": {"level": "ERROR", "filters": ["not_implemented_is_warning"]},
                # the line per request: JSON logs only (the text logs have the server's access log)
                "gateway.requests": {"level": "INFO" if LOG_FORMAT == "json" else "WARNING"},
                # httpx logs each request's URL at INFO, and the Telegram bot token is part of its URLs;
                # so does httpx2, the `mcp` client's HTTP library (an MCP server's URL may carry a token)
                "httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}},
}

# --- Metrics (GET /metrics, docs/operations.md) ---------------------------------------------
# Every process (web workers, Celery) keeps its Prometheus values in files of this folder, which
# the scrape adds up. prometheus_client reads it from the environment when first imported.
PROMETHEUS_MULTIPROC_DIR = Path(env.str("PROMETHEUS_MULTIPROC_DIR", default="") or VAR_DIR / "metrics")
PROMETHEUS_MULTIPROC_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(PROMETHEUS_MULTIPROC_DIR)
# A scrape must send `Authorization: Bearer <METRICS_TOKEN>`; empty: only loopback clients may scrape.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# Seconds the scrape waits for the task broker when it reads the queue's length.
METRICS_BROKER_TIMEOUT_SECONDS = env.float("METRICS_BROKER_TIMEOUT_SECONDS", default=2.0)

# Seconds a process keeps its copy of the model registry at most. A change is seen at once anyway
# (a version stamp read per call, gateway/registry/routing.py); this is the backstop for writes that send
# no signal (model discovery's bulk writes) and for a stamp that Redis could not keep.
REGISTRY_TTL_SECONDS = env.float("REGISTRY_TTL_SECONDS", default=5.0)

# Largest audio upload for /v1/audio/transcriptions and translations (OpenAI's own limit: 25 MiB).
MAX_AUDIO_UPLOAD_BYTES = env.int("MAX_AUDIO_UPLOAD_BYTES", default=25 * 1024 * 1024)
# POST /v1/responses carries function tools to the models (off: tools answer 501, spec 7.2).
RESPONSES_TOOLS = env.bool("RESPONSES_TOOLS", default=False)

# Usage records are appended to a spool file of each process under USAGE_SPOOL_DIR (one per host,
# shared by its processes) and written to the database by a background thread every
# USAGE_FLUSH_SECONDS, USAGE_BATCH_SIZE records per INSERT; every USAGE_ORPHAN_SCAN_SECONDS each
# process also writes the spool files of processes that died (see gateway/usage/writer.py).
# USAGE_BATCHED=false: each record is inserted inline instead (the in-process tests).
USAGE_BATCHED = env.bool("USAGE_BATCHED", default=True)
USAGE_FLUSH_SECONDS = env.float("USAGE_FLUSH_SECONDS", default=0.5)
USAGE_BATCH_SIZE = env.int("USAGE_BATCH_SIZE", default=500)
USAGE_SPOOL_DIR = Path(env.str("USAGE_SPOOL_DIR", default=str(VAR_DIR / "spool")))
USAGE_ORPHAN_SCAN_SECONDS = env.float("USAGE_ORPHAN_SCAN_SECONDS", default=5.0)

# The installation's one currency (issue 25): what model prices and budgets are in, as an ISO 4217 code.
CURRENCY = env.str("CURRENCY", default="USD").strip().upper()
if not (len(CURRENCY) == 3 and CURRENCY.isalpha()):
    raise ImproperlyConfigured(f"CURRENCY must be a three-letter ISO 4217 code such as USD, not {CURRENCY!r}.")

# --- Accounts, native API and routines -----------------------------------------------------
# Their settings, in modules of their own: every upper-case name of each (its `__all__`).
from gateway.settings.accounts import *  # noqa: E402,F403
from gateway.settings.audit import *  # noqa: E402,F403
from gateway.settings.calls import *  # noqa: E402,F403
from gateway.settings.console import *  # noqa: E402,F403
from gateway.settings.native import *  # noqa: E402,F403
from gateway.settings.routines import *  # noqa: E402,F403
from gateway.settings.sign_in import *  # noqa: E402,F403

# The file broker of the embedded default needs its folders; kombu does not make them.
if CELERY_BROKER_URL.startswith("filesystem://"):
    for _folder in ("data_folder_in", "processed_folder", "control_folder"):
        Path(CELERY_BROKER_TRANSPORT_OPTIONS[_folder]).mkdir(parents=True, exist_ok=True)

# --- Outages and model servers --------------------------------------------------------------
# Seconds a model server that failed to connect or timed out before its first byte is skipped by
# every process (gateway/registry/cooldown.py); then one call tries it again. 0 turns cooldowns off.
SERVER_COOLDOWN_SECONDS = env.float("SERVER_COOLDOWN_SECONDS", default=30.0)
# Retry-After of the 503 answered while PostgreSQL or Redis cannot be reached.
OUTAGE_RETRY_AFTER_SECONDS = env.int("OUTAGE_RETRY_AFTER_SECONDS", default=5)
# Seconds between two writes of a process's model server health (last success, last failure) to
# the shared cache, for the admin (gateway/registry/server_health.py); a proxied call itself writes nothing.
SERVER_HEALTH_FLUSH_SECONDS = env.float("SERVER_HEALTH_FLUSH_SECONDS", default=5.0)
