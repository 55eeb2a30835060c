"""Settings: every value comes from the environment, with a default that works on a laptop.

Each variable is listed, with a one-line comment, in `.env.example`. A value that cannot be
parsed fails at start-up with django-environ's message naming the variable.
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env.str("GATEWAY_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = env.str("SECRET_KEY", default="dev-only-insecure-secret-key-change-me")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Spec 5.1.4: plain http is redirected to https in production.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "gateway",
    "accounts",
    "native",
    "routines",
]

MIDDLEWARE = [
    "gateway.middleware.RequestIdMiddleware",
    "gateway.surfaces.SurfaceMiddleware",
]
# The operator console's middleware, applied by SurfaceMiddleware to every path outside /v1 and /api.
CONSOLE_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
# The admin's checks look for its middleware in MIDDLEWARE; it is in CONSOLE_MIDDLEWARE instead.
SILENCED_SYSTEM_CHECKS = ["admin.E408", "admin.E409", "admin.E410"]

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

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'gateway.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the worker read while the web process writes; the timeout rides out short locks.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}
    )
    # Tests that start real server processes need a database file they can share.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-gateway.sqlite3")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Under ASGI every request runs its database work in a thread of its own, so persistent
    # connections cannot be reused; a pool hands each one an open connection instead of a new
    # connect (about 4 ms and a server process fork per request otherwise).
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DB_POOL_MIN_SIZE", default=2),
        "max_size": env.int("DB_POOL_MAX_SIZE", default=20),
        "timeout": 10,
    }
DATABASES["default"]["CONN_MAX_AGE"] = 0

REDIS_URL = env.str("REDIS_URL", default="")

if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "gateway_cache"}
    }

AUTH_USER_MODEL = "accounts.Account"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
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
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL or "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {}
    if not CELERY_BROKER_URL.startswith("filesystem://")
    else {
        "data_folder_in": str(VAR_DIR / "broker"),
        "data_folder_out": str(VAR_DIR / "broker"),
        "processed_folder": str(VAR_DIR / "broker-processed"),
        "store_processed": False,
    }
)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.request": {"level": "ERROR"}},
}

# Proxies in front of the service that append to X-Forwarded-For (0: use the socket address).
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)

# Seconds a process keeps its copy of the model registry before reading it again.
REGISTRY_TTL_SECONDS = env.float("REGISTRY_TTL_SECONDS", default=5.0)

# Largest audio upload for /v1/audio/transcriptions and translations (OpenAI's own limit: 25 MiB).
MAX_AUDIO_UPLOAD_BYTES = env.int("MAX_AUDIO_UPLOAD_BYTES", default=25 * 1024 * 1024)

# Usage records are inserted in batches by a background thread (see gateway/usage_writer.py):
# at most every USAGE_FLUSH_SECONDS, or at once when USAGE_BATCH_SIZE records are waiting.
USAGE_BATCHED = env.bool("USAGE_BATCHED", default=True)
USAGE_FLUSH_SECONDS = env.float("USAGE_FLUSH_SECONDS", default=0.5)
USAGE_BATCH_SIZE = env.int("USAGE_BATCH_SIZE", default=500)

# Seconds a process keeps who a credential belongs to; a change to the key, session, account or
# group is seen at once anyway (see accounts/principal_cache.py). 0 turns the cache off.
CREDENTIAL_CACHE_SECONDS = env.float("CREDENTIAL_CACHE_SECONDS", default=10.0)
