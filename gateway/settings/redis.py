"""Settings of the gateway's Redis: one server at REDIS_URL, or the primary that Redis Sentinel names.

Without REDIS_SENTINELS (the default) nothing changes: REDIS_URL is the Redis of the counters, the Django caches
and the Celery broker (empty: the embedded default, no Redis at all). With REDIS_SENTINELS, the primary of the
Sentinel service REDIS_SENTINEL_SERVICE is asked of the Sentinels whenever a connection is made, so a failover
moves every user of Redis to the new primary: REDIS_URL then gives only the database number, the user name and
the password of the Redis servers (its host and port are ignored; `redis://:password@sentinel-service/0` reads
well), and defaults to `redis://<service>/0`. REDIS_SENTINEL_PASSWORD is the Sentinels' own password (their
`requirepass`), when they have one. TLS to a Sentinel-managed Redis is not offered (a rediss:// URL is refused).

With them, or without: the Django caches (Redis, or the database cache of the embedded default) and the broker
URL the Celery settings default to (gateway/settings/task_queue.py).

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from urllib.parse import quote, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader


def sentinel_addresses(text: str) -> list[tuple[str, int]]:
    """`host:port,host:port` (a port left out is Sentinel's 26379; an IPv6 host in brackets) as (host, port)
    pairs; ImproperlyConfigured naming the first item that is not one."""
    found = []
    for item in (part.strip() for part in text.split(",")) if text.strip() else ():
        try:
            parsed = urlsplit(f"//{item}")
            host, port = parsed.hostname, parsed.port or 26379
            if not host or parsed.username or parsed.password or parsed.path or " " in item:
                raise ValueError
        except ValueError:
            raise ImproperlyConfigured(
                f"REDIS_SENTINELS must be a comma-separated list of host:port (for example "
                f"sentinel-1:26379,sentinel-2:26379,sentinel-3:26379); {item!r} is not one.") from None
        found.append((host, port))
    return found



def embedded_cache() -> dict:
    """Counters live in the cache without Redis. Culling at Django's default of 300 entries would
    drop live request windows and duplicate marks; past 100000 it removes the expired ones first."""
    return {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "gateway_cache",
            "OPTIONS": {"MAX_ENTRIES": 100_000}}


def from_env(env: Environment = None) -> dict:
    env = reader(env)
    sentinels = sentinel_addresses(env.str("REDIS_SENTINELS", default=""))
    service = env.str("REDIS_SENTINEL_SERVICE", default="mymaster").strip()
    sentinel_password = env.str("REDIS_SENTINEL_PASSWORD", default="")
    url = env.str("REDIS_URL", default="" if not sentinels else f"redis://{service}/0")
    found = {"REDIS_SENTINELS": sentinels, "REDIS_SENTINEL_SERVICE": service,
             "REDIS_SENTINEL_PASSWORD": sentinel_password, "REDIS_URL": url,
             # What the Django caches and the Celery broker are given: the pool class that asks the
             # Sentinels for the primary, and kombu's `sentinel://` broker with its `master_name`.
             "REDIS_CACHE_OPTIONS": {}, "REDIS_BROKER_URL": url, "REDIS_BROKER_TRANSPORT_OPTIONS": {}}
    if sentinels:
        found.update(through_sentinels(url, sentinels, service, sentinel_password))
    return {**found, **caches(url, found["REDIS_CACHE_OPTIONS"])}


def through_sentinels(url: str, sentinels: list[tuple[str, int]], service: str, sentinel_password: str) -> dict:
    if not service or any(c.isspace() for c in service):
        raise ImproperlyConfigured("REDIS_SENTINEL_SERVICE must name the Sentinel service (`sentinel monitor "
                                   "<name> ...`), without spaces; the default is mymaster.")
    parts = urlsplit(url)
    if parts.scheme != "redis":
        raise ImproperlyConfigured("With REDIS_SENTINELS, REDIS_URL gives the database and the password of the "
                                   "Redis servers and must be a redis:// URL (redis://:password@service/0): "
                                   "TLS and Unix sockets are not offered with Sentinel.")
    try:
        db = int(parts.path.strip("/") or 0)
    except ValueError:
        raise ImproperlyConfigured("REDIS_URL's path must be a database number, such as /0.") from None
    credentials = (f"{quote(unquote(parts.username or ''), safe='')}:{quote(unquote(parts.password), safe='')}@"
                   if parts.password else "")
    transport_options = {"master_name": service}
    if sentinel_password:
        transport_options["sentinel_kwargs"] = {"password": sentinel_password}
    return {"REDIS_CACHE_OPTIONS": {"pool_class": "gateway.state.redis.sentinel.SentinelPool", "sentinels": sentinels,
                                    "service": service, "sentinel_password": sentinel_password},
            "REDIS_BROKER_URL": ";".join(f"sentinel://{credentials}{f'[{h}]' if ':' in h else h}:{p}/{db}"
                                         for h, p in sentinels),
            "REDIS_BROKER_TRANSPORT_OPTIONS": transport_options}


def caches(url: str, options: dict) -> dict:
    """The Django caches: Redis at `url`, or the database cache of the embedded default (no Redis)."""
    embedded = embedded_cache()
    default = ({"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url, "OPTIONS": options}
               if url else embedded)
    # django-ratelimit's counts (the admin login, accounts/admin_login.py), beside the counters ("gw:").
    # Without Redis, the database cache with an atomic add and increment (E003 refuses the plain one).
    ratelimit = {**default, "KEY_PREFIX": "gw"}
    if not url:
        ratelimit["BACKEND"] = "accounts.admin_login.CounterCache"
    return {"EMBEDDED_CACHE": embedded, "CACHES": {"default": default, "ratelimit": ratelimit},
            "RATELIMIT_USE_CACHE": "ratelimit"}
