"""Where the shared state lives, chosen once: Redis when REDIS_URL is set (any number of web and
worker processes share it), otherwise the Django cache, which the embedded default keeps in the
database. The one module that reads REDIS_URL to choose (as Zulip's `RateLimiterBackend` and
Saleor's circuit-breaker storage are chosen once); every other module talks to `current`:

    from gateway.state import backend
    backend.current.window_hit(...)

Both backends answer the same methods with the same results, for the same keys (without the
prefix: the backend adds it): the counters (gateway/state/counters.py), the cooldowns and stamps of
gateway/registry, and `reset()` for the tests.

The choice is made when the process starts (this module is imported with the URLconf, or with the
Celery app's tasks), and again when a test changes REDIS_URL (Django's `setting_changed`, sent by
`override_settings` and pytest-django's `settings`): nothing asks for the setting per call.
"""

from __future__ import annotations

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from gateway.state.cache_backend import CacheBackend
from gateway.state.redis import loop
from gateway.state.redis.backend import RedisBackend
from gateway.state.redis.sentinel import Sentinels


def choose() -> RedisBackend | CacheBackend:
    """The backend the settings ask for: with REDIS_SENTINELS, Redis is the primary they name. The event
    loop's client (gateway/state/redis/loop.py) is told which."""
    chosen = CacheBackend() if not settings.REDIS_URL else RedisBackend(
        settings.REDIS_URL, sentinels_of(settings), cache=CacheBackend())
    loop.follow(chosen)
    return chosen


def sentinels_of(config) -> Sentinels | None:
    """The Sentinels the settings name (REDIS_SENTINELS, REDIS_SENTINEL_SERVICE, REDIS_SENTINEL_PASSWORD), or None."""
    addresses = tuple((host, int(port)) for host, port in getattr(config, "REDIS_SENTINELS", ()) or ())
    if not addresses:
        return None
    return Sentinels(addresses, config.REDIS_SENTINEL_SERVICE, config.REDIS_SENTINEL_PASSWORD or "")


current: RedisBackend | CacheBackend = choose()


@receiver(setting_changed)
def _follow_the_setting(*, setting: str, **_kwargs) -> None:
    global current
    if setting in ("REDIS_URL", "REDIS_SENTINELS"):
        current = choose()
