"""Settings of the gateway's Redis (issue 28): one server at REDIS_URL, or the primary that Redis Sentinel names.

Without REDIS_SENTINELS (the default) nothing changes: REDIS_URL is the Redis of the counters, the Django caches
and the Celery broker (empty: the embedded default, no Redis at all). With REDIS_SENTINELS, the primary of the
Sentinel service REDIS_SENTINEL_SERVICE is asked of the Sentinels whenever a connection is made, so a failover
moves every user of Redis to the new primary: REDIS_URL then gives only the database number, the user name and
the password of the Redis servers (its host and port are ignored; `redis://:password@sentinel-service/0` reads
well), and defaults to `redis://<service>/0`. REDIS_SENTINEL_PASSWORD is the Sentinels' own password (their
`requirepass`), when they have one. TLS to a Sentinel-managed Redis is not offered (a rediss:// URL is refused).

Part of gateway/settings.py, which imports every upper-case name here (`__all__`) after it has read `.env`;
each variable is listed in `.env.example` like the others.
"""

from urllib.parse import quote, unquote, urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

env = environ.Env()


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


REDIS_SENTINELS = sentinel_addresses(env.str("REDIS_SENTINELS", default=""))
REDIS_SENTINEL_SERVICE = env.str("REDIS_SENTINEL_SERVICE", default="mymaster").strip()
REDIS_SENTINEL_PASSWORD = env.str("REDIS_SENTINEL_PASSWORD", default="")
REDIS_URL = env.str("REDIS_URL", default="" if not REDIS_SENTINELS else f"redis://{REDIS_SENTINEL_SERVICE}/0")

# What the Django caches and the Celery broker are given (gateway/settings.py): the pool class that asks the
# Sentinels for the primary, and kombu's `sentinel://` broker with its `master_name`.
REDIS_CACHE_OPTIONS: dict = {}
REDIS_BROKER_URL = REDIS_URL
REDIS_BROKER_TRANSPORT_OPTIONS: dict = {}
if REDIS_SENTINELS:
    if not REDIS_SENTINEL_SERVICE or any(c.isspace() for c in REDIS_SENTINEL_SERVICE):
        raise ImproperlyConfigured("REDIS_SENTINEL_SERVICE must name the Sentinel service (`sentinel monitor "
                                   "<name> ...`), without spaces; the default is mymaster.")
    _url = urlsplit(REDIS_URL)
    if _url.scheme != "redis":
        raise ImproperlyConfigured("With REDIS_SENTINELS, REDIS_URL gives the database and the password of the "
                                   "Redis servers and must be a redis:// URL (redis://:password@service/0): "
                                   "TLS and Unix sockets are not offered with Sentinel.")
    try:
        _db = int(_url.path.strip("/") or 0)
    except ValueError:
        raise ImproperlyConfigured("REDIS_URL's path must be a database number, such as /0.") from None
    REDIS_CACHE_OPTIONS = {"pool_class": "gateway.state.redis.sentinel.SentinelPool", "sentinels": REDIS_SENTINELS,
                           "service": REDIS_SENTINEL_SERVICE, "sentinel_password": REDIS_SENTINEL_PASSWORD}
    _credentials = (f"{quote(unquote(_url.username or ''), safe='')}:{quote(unquote(_url.password), safe='')}@"
                    if _url.password else "")
    REDIS_BROKER_URL = ";".join(f"sentinel://{_credentials}{f'[{h}]' if ':' in h else h}:{p}/{_db}"
                                for h, p in REDIS_SENTINELS)
    REDIS_BROKER_TRANSPORT_OPTIONS = {"master_name": REDIS_SENTINEL_SERVICE}
    if REDIS_SENTINEL_PASSWORD:
        REDIS_BROKER_TRANSPORT_OPTIONS["sentinel_kwargs"] = {"password": REDIS_SENTINEL_PASSWORD}

__all__ = [name for name in dir() if name.isupper()]  # the settings: what gateway/settings.py imports
