"""Redis behind Sentinel (REDIS_SENTINELS set; gateway/settings/redis.py): every connection is made to the primary
the Sentinels name at that moment, so a failover moves the process to the new primary at its next connection.

- `Sentinels`: the addresses, the service and the Sentinels' password (read by gateway/state/backend.py).
- `master_pool(url, sentinels)`: redis-py's pool of connections to the primary: it asks the Sentinels at each new
  connection, and a connection that finds the old primary demoted (`READONLY`) is dropped and fails with
  ConnectionError, an outage (gateway/web/errors.py); the next one goes to the new primary. The counters' client
  (gateway/state/redis/client.py), the health probe and, through `SentinelPool`, the Django caches use it; kombu's
  `sentinel://` transport does the same for the Celery broker. `primary_address`: the primary, as named now.

While no primary is named (the failover takes `down-after-milliseconds` plus the election), connections fail with
MasterNotFoundError (a ConnectionError) or are refused: outages.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from redis.sentinel import SentinelConnectionPool

SOCKET_SECONDS = 2.0  # the Sentinels' and the servers' connect and read timeouts, as the plain client's


@dataclass(frozen=True)
class Sentinels:
    """Where to ask for the primary: Sentinel addresses, the service name, the Sentinels' own password."""

    addresses: tuple[tuple[str, int], ...]
    service: str
    password: str = ""

    def __repr__(self) -> str:  # never the password
        return f"Sentinels({list(self.addresses)!r}, {self.service!r})"


@lru_cache(maxsize=None)
def manager(sentinels: Sentinels):
    """redis-py's `Sentinel`: one connection to each Sentinel, asked in turn (the one that answers first moves
    to the front)."""
    from redis.sentinel import Sentinel

    options = {"socket_timeout": SOCKET_SECONDS, "socket_connect_timeout": SOCKET_SECONDS}
    if sentinels.password:
        options["password"] = sentinels.password
    return Sentinel(list(sentinels.addresses), sentinel_kwargs=options)


class WatchedPool(SentinelConnectionPool):
    """redis-py's pool of connections to the primary, which also tells `on_primary` the address the Sentinels
    named each time it asks them (at each new connection)."""

    def __init__(self, *args, on_primary=None, **kwargs):
        super().__init__(*args, **kwargs)
        if on_primary is not None:  # the connections ask the pool's proxy, not the pool
            asking = self.proxy.get_master_address

            def get_master_address():
                address = asking()
                on_primary(address)
                return address

            self.proxy.get_master_address = get_master_address


def master_pool(url: str, sentinels: Sentinels, on_primary=None, **options):
    """A pool of connections to the service's primary, with the database, user name and password of `url` (its
    host and port are not used) and `options` (redis-py's connection keywords); `on_primary(address)` is called
    with the primary's address at each new connection."""
    from redis.connection import parse_url

    kwargs = {k: v for k, v in parse_url(url).items() if k not in ("host", "port")}
    kwargs.setdefault("socket_timeout", SOCKET_SECONDS)
    kwargs.setdefault("socket_connect_timeout", SOCKET_SECONDS)
    return WatchedPool(sentinels.service, manager(sentinels), on_primary=on_primary, **{**kwargs, **options})


def master_client(url: str, sentinels: Sentinels, on_primary=None, **options):
    """A redis-py client of the service's primary (see `master_pool`)."""
    import redis

    return redis.Redis(connection_pool=master_pool(url, sentinels, on_primary, **options))


def primary_address(sentinels: Sentinels) -> tuple[str, int]:
    """The primary's (host, port) as the Sentinels name it now; MasterNotFoundError when none does."""
    return manager(sentinels).discover_master(sentinels.service)


class SentinelPool:
    """The `pool_class` of the Django caches with Sentinel (gateway/settings/redis.py sets it in their OPTIONS):
    Django's RedisCache builds its pool with `pool_class.from_url(LOCATION, **OPTIONS)`."""

    @classmethod
    def from_url(cls, url: str, *, sentinels, service: str, sentinel_password: str = "", **options):
        where = Sentinels(tuple((host, int(port)) for host, port in sentinels), service, sentinel_password)
        return master_pool(url, where, **options)
