"""Running a chain of models (DESIGN.md, Models; spec 7.2, 7.3): the first model whose reply
begins answers; a failure before the first byte moves to the next."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from gateway import providers
from gateway.errors import ApiError
from gateway.providers.base import BAD_RESPONSE, REFUSED, UpstreamError
from gateway.redact import redact
from gateway.routing import Target

DEFAULT_RETRY_AFTER = 10

logger = logging.getLogger(__name__)


@dataclass
class OpenedReply:
    target: Target
    chunks: AsyncIterator[dict[str, Any]]  # starts with the first chunk


class ChainExhausted(ApiError):
    """Every model failed. `retry_after` is set when all failures were retryable (503)."""

    retry_after: int | None = None


async def open_reply(chain: list[Target], body: dict[str, Any], *, refusals_fall_through: bool) -> OpenedReply:
    """On /v1 a provider's refusal falls through to the next model too (spec 7.3, last
    paragraph); elsewhere it is answered at once with the provider's own status."""
    failures: list[UpstreamError] = []
    for target in chain:
        stream = providers.chat_stream(target, body)
        try:
            first = await anext(stream)
        except UpstreamError as failure:
            if failure.kind == REFUSED and not refusals_fall_through:
                raise ApiError(failure.status, failure.message, code="upstream_refused") from None
            failures.append(fell_through(target, failure, last=target is chain[-1]))
            continue
        except StopAsyncIteration:
            failures.append(fell_through(target, UpstreamError(BAD_RESPONSE, 502, "The model server returned nothing."),
                                         last=target is chain[-1]))
            continue
        return OpenedReply(target, _chain_first(first, stream))
    raise exhausted(failures)


async def _chain_first(first: dict[str, Any], rest: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    yield first
    async for chunk in rest:
        yield chunk


def fell_through(target: Target, failure: UpstreamError, *, last: bool) -> UpstreamError:
    """Log a model's failure before the first byte, with server, model and cause; returns it.
    The cause is the server's own words, without its key (the failure's message already is)."""
    cause = redact(failure.cooldown_cause or f"{failure.status} {failure.message}", [target.server.api_key])
    logger.warning("model %s on server %s failed: %s; %s", target.name, target.server.name, cause,
                   "no model left in the chain" if last else "trying the next model")
    return failure


def exhausted(failures: list[UpstreamError]) -> ChainExhausted:
    refusal = next((f for f in failures if f.kind == REFUSED), None)
    if refusal is not None:
        return ChainExhausted(refusal.status, refusal.message, code="upstream_refused")
    if any(f.kind == BAD_RESPONSE for f in failures):
        last = failures[-1]
        return ChainExhausted(502, f"The model server failed: {last.message}", code="bad_gateway")
    waits = [f.retry_after for f in failures if f.retry_after]
    retry_after = max(1, math.ceil(max(waits))) if waits else DEFAULT_RETRY_AFTER
    error = ChainExhausted(
        503,
        f"Every model in the chain is unavailable right now; retry in {retry_after} seconds.",
        code="service_unavailable",
        headers={"Retry-After": str(retry_after)},
    )
    error.retry_after = retry_after
    return error
