"""Request ceilings per minute (spec 8.1–8.3), declared per endpoint in one line.

An endpoint names its `Limit`; `limit_hit` counts the request against the counters that limit
uses and returns the headers to send, or raises the 429 of the counter that refused:

- the shared counter: one per account for every row of 8.1 with its own number (except login,
  collections and webhooks); each endpoint compares it with its own ceiling, so the lowest
  ceiling in play wins;
- the general counter: 300 per account for every other endpoint, also fed by native chat,
  agent and embeddings calls (8.1 rule 3); its 429 is `{codigo, detail}`;
- per-address counters (login, webhooks) and the collections' own counters.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest

from gateway.state.counters import HitResult, window_hit
from gateway.telemetry import metrics
from gateway.web.errors import GeneralLimitReached, TooManyAttempts
from gateway.web.middleware import forwarded_host, is_trusted_proxy

SHARED = "shared"
GENERAL = "general"


@dataclass(frozen=True)
class Limit:
    name: str  # key of settings.RATE_LIMITS: this endpoint's own ceiling
    counter: str  # the counter it is compared with
    also_general: bool = False  # also counts against the 300-per-minute counter
    per_address: bool = False  # counted per client address rather than per account

    @property
    def ceiling(self) -> int:
        return settings.RATE_LIMITS[self.name]


V1 = Limit("v1", SHARED)
CHAT = Limit("chat", SHARED, also_general=True)
AGENT_CHAT = Limit("agent_chat", SHARED, also_general=True)
AGENT_RUN = Limit("agent_run", SHARED, also_general=True)
EMBEDDINGS = Limit("embeddings", SHARED, also_general=True)
PROFILES = Limit("profiles", SHARED)
VERSION = Limit("version", SHARED)
CONVERSATION_PURGE = Limit("conversation_purge", SHARED)
COLLECTION_WRITE = Limit("collection_write", "collection_write")
COLLECTION_SEARCH = Limit("collection_search", "collection_search")
COLLECTION_REINDEX = Limit("collection_reindex", "collection_reindex")
DEFAULT = Limit("general", GENERAL)
LOGIN = Limit("login", "login", per_address=True)
HOOKS = Limit("hooks", "hooks", per_address=True)


def limit_counters(limit: Limit, *, subject: str) -> list[tuple[str, int]]:
    """The counters one request of `subject` ("acct:<id>" or "ip:<address>") adds to."""
    counters = [(f"{subject}:{limit.counter}", limit.ceiling)]
    if limit.also_general:
        counters.append((f"{subject}:{GENERAL}", settings.RATE_LIMITS["general"]))
    return counters


def limit_headers(result: HitResult) -> dict[str, str]:
    """The X-RateLimit-* headers of the endpoint's own ceiling, or the refusing counter's 429."""
    refused = result.refused_by
    if refused is None:
        if not result.windows:
            return {}
        own = result.windows[0]
        return {"X-RateLimit-Limit": str(own.ceiling), "X-RateLimit-Remaining": str(own.remaining)}
    headers = {
        "X-RateLimit-Limit": str(refused.ceiling),
        "X-RateLimit-Remaining": "0",
        "Retry-After": str(max(math.ceil(refused.reset_at - time.time()), 1)),
        "X-RateLimit-Reset": str(math.ceil(refused.reset_at)),
    }
    metrics.rate_limit_refused(refused.key.rpartition(":")[2])  # the counter's name, not its subject
    if refused.key.endswith(f":{GENERAL}"):
        raise GeneralLimitReached(headers)
    raise TooManyAttempts(headers)


def limit_hit(limit: Limit, *, subject: str) -> dict[str, str]:
    """Count one request against `limit` alone (no credential involved: login, webhooks)."""
    return limit_headers(window_hit(limit_counters(limit, subject=subject), settings.RATE_WINDOW_SECONDS))


def client_address(request: HttpRequest) -> str:
    """The caller's address: REMOTE_ADDR, or, when that is one of TRUSTED_PROXIES, the last hop of
    X-Forwarded-For that is not one of them (each trusted proxy appends the address it saw, so the
    hops to the left of the first untrusted one are the client's word and are not believed)."""
    peer = request.META.get("REMOTE_ADDR", "")
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if forwarded and is_trusted_proxy(peer):
        hops = [forwarded_host(hop) for hop in forwarded.split(",") if hop.strip()]
        for hop in reversed(hops):
            if not is_trusted_proxy(hop):
                return hop[:64]
        if hops:  # every hop is a trusted proxy: the first one is as far as can be seen
            return hops[0][:64]
    return peer or "unknown"
