"""Settings of the accounts side of every API request (accounts/): the per-process cache of who a
credential belongs to, and the answers kept for an `Idempotency-Key`.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader

# Seconds the claim of a request still being answered holds its Idempotency-Key before a retry may take it
# over (its process died; accounts/idempotency.py).
IDEMPOTENCY_HOLD_SECONDS = 900


def from_env(env: Environment = None) -> dict:
    env = reader(env)
    found = {
        # Internal (docs/configuration.md): seconds a process keeps who a credential belongs to; a change to
        # the key, session, account or group is seen at once anyway (see accounts/principal_cache.py). 0 turns
        # the cache off.
        "CREDENTIAL_CACHE_SECONDS": env.float("CREDENTIAL_CACHE_SECONDS", default=10.0),
        # Idempotency-Key (accounts/idempotency.py): seconds an account's key and the first answer to
        # it are kept.
        "IDEMPOTENCY_TTL_SECONDS": env.int("IDEMPOTENCY_TTL_SECONDS", default=86400),
        "IDEMPOTENCY_HOLD_SECONDS": IDEMPOTENCY_HOLD_SECONDS,
        # Internal (docs/configuration.md): seconds between two writes of the API keys' last-used times a
        # process noted (accounts/key_use.py); each key's time moves at most once a minute whatever this is.
        "API_KEY_USE_FLUSH_SECONDS": env.float("API_KEY_USE_FLUSH_SECONDS", default=10.0),
    }
    if found["IDEMPOTENCY_TTL_SECONDS"] < 1:
        raise ImproperlyConfigured("IDEMPOTENCY_TTL_SECONDS must be at least 1.")
    return found
