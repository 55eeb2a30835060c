"""Settings of the service itself: passwords and the first operator, outgoing e-mail, what one request may
carry and how many a client may make, the model servers (the registry each process keeps, cooldowns, their
health), the answer while PostgreSQL or Redis is down, and the web process's garbage collector.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from __future__ import annotations

from gateway.settings.environment import Environment, reader


def from_env(env: Environment = None) -> dict:
    env = reader(env)
    email = env.email_url("EMAIL_URL", default="consolemail://")
    return {
        "PASSWORD_HASHERS": env.list("PASSWORD_HASHERS", default=[
            "django.contrib.auth.hashers.PBKDF2PasswordHasher",
            "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
        ]),
        # Operator account made on the first start of `bin/serve` (embedded defaults).
        "OPERATOR_EMAIL": env.str("OPERATOR_EMAIL", default="operator@localhost"),
        "EMAIL_CONFIG": email,
        **email,
        "DEFAULT_FROM_EMAIL": env.str("DEFAULT_FROM_EMAIL", default="gateway@localhost"),
        # Largest request body the JSON endpoints read; larger bodies are answered 413.
        "DATA_UPLOAD_MAX_MEMORY_SIZE": env.int("MAX_REQUEST_BODY_BYTES", default=10 * 1024 * 1024),
        # Largest audio upload for /v1/audio/transcriptions and translations (OpenAI's own limit: 25 MiB).
        "MAX_AUDIO_UPLOAD_BYTES": env.int("MAX_AUDIO_UPLOAD_BYTES", default=25 * 1024 * 1024),
        # Request ceilings per minute (spec 8.1): the spec's defaults, each one an operator may change.
        "RATE_LIMITS": {
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
        },
        # POST /v1/responses carries function tools to the models (off: tools answer 501, spec 7.2).
        "RESPONSES_TOOLS": env.bool("RESPONSES_TOOLS", default=False),
        # Internal (docs/configuration.md): seconds a process keeps its copy of the model registry at most. A
        # change is seen at once anyway (a version stamp read per call, gateway/registry/routing.py); this is the
        # backstop for writes that send no signal (model discovery's bulk writes) and for a stamp that Redis
        # could not keep.
        "REGISTRY_TTL_SECONDS": env.float("REGISTRY_TTL_SECONDS", default=5.0),
        # Seconds a model server that failed to connect or timed out before its first byte is skipped by
        # every process (gateway/registry/cooldown.py); then one call tries it again. 0 turns cooldowns off.
        "SERVER_COOLDOWN_SECONDS": env.float("SERVER_COOLDOWN_SECONDS", default=30.0),
        # Internal (docs/configuration.md): seconds between two writes of a process's model server health (last
        # success, last failure) to the shared cache, for the admin (gateway/registry/server_health.py); a
        # proxied call itself writes nothing.
        "SERVER_HEALTH_FLUSH_SECONDS": env.float("SERVER_HEALTH_FLUSH_SECONDS", default=5.0),
        # Retry-After of the 503 answered while PostgreSQL or Redis cannot be reached.
        "OUTAGE_RETRY_AFTER_SECONDS": env.int("OUTAGE_RETRY_AFTER_SECONDS", default=5),
        # Internal (docs/configuration.md): the web process's garbage collector (gateway/ops/web_process.py):
        # what is loaded at start is frozen, and these thresholds replace Python's (700, 10, 10). Empty:
        # Python's defaults, nothing frozen (a benchmark's what-if, bench/README.md).
        "GC_THRESHOLDS": tuple(env.list("GC_THRESHOLDS", cast=int, default=[50_000, 20, 100])),
    }
