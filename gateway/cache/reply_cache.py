"""The response cache as one call sees it (`reply_cache`): made by a chat surface once the call's
checks passed (credential, ceiling, allowed model, quota), asked for a kept reply before the chain is
tried (`lookup`), and given the reply to keep once it ended whole (`record`, then `keep`).

    cache = reply_cache(group=..., surface="chat.completions", requested_model=..., chain=..., body=...,
                        cache_control_header=request.headers.get("Cache-Control"))
    entry = await cache.lookup() if cache else None   # a hit: replay(entry) instead of the chain
"""

from __future__ import annotations

from typing import Any

from gateway.cache import store
from gateway.cache.entry import Entry, Recorder
from gateway.cache.keys import Wanted, cache_control, cache_key, key_model
from gateway.registry.snapshot import Target

HIT = "hit"
MISS = "miss"
HEADER = "X-Cache"


class ReplyCache:
    """One call's key, what its `Cache-Control` allows, and whether a kept reply answered it."""

    def __init__(self, *, key: str, seconds: int, wanted: Wanted, chain: list[Target]) -> None:
        self.key = key
        self.seconds = seconds
        self.wanted = wanted
        self.models = frozenset(target.public_id for target in chain)
        self.hit = False

    @property
    def status(self) -> str:
        return HIT if self.hit else MISS

    def headers(self) -> dict[str, str]:
        """`X-Cache: hit` or `miss`, on every answer of a call whose group caches."""
        return {HEADER: self.status}

    async def lookup(self) -> Entry | None:
        """The kept reply, unless `Cache-Control: no-cache` asks for a fresh one. Only when the model
        that made it is in the call's chain now (planned for the group: allowed to it, in the registry,
        and one that would answer this request); otherwise a miss, and the new reply replaces it."""
        if not self.wanted.read:
            return None
        data = await store.fetch(self.key)
        entry = Entry.loads(data) if data is not None else None
        if entry is None or entry.model not in self.models:
            return None
        self.hit = True
        return entry

    def record(self, kind: str) -> Recorder | None:
        """A recorder for the reply about to come, unless `Cache-Control: no-store` forbids keeping it."""
        return Recorder(kind) if self.wanted.write and not self.hit else None

    async def keep(self, recorder: Recorder, *, model: str, usage: dict[str, int]) -> None:
        """Keep a reply that ended whole (never one cut midway: the caller asks only then)."""
        data = recorder.entry(model=model, usage=usage).dumps()
        if data is not None:
            await store.keep(self.key, data, self.seconds)


def reply_cache(*, group: Any, surface: str, requested_model: Any, chain: list[Target], body: dict[str, Any],
                cache_control_header: str | None = None, extra: dict[str, Any] | None = None) -> ReplyCache | None:
    """The call's cache, or None when its group keeps no replies (`response_cache_ttl` 0)."""
    seconds = group.response_cache_ttl
    if seconds <= 0:
        return None
    key = cache_key(group_id=group.pk, surface=surface, model=key_model(requested_model, chain), body=body,
                    extra=extra)
    return ReplyCache(key=key, seconds=seconds, wanted=cache_control(cache_control_header), chain=chain)
