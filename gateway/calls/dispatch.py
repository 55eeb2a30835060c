"""A chat reply from a chain of models: the first model whose first chunk comes answers
(gateway/calls/chain.py tries them and records each attempt); its chunks follow, watched for the
attempt's span, and the call in flight lands when they end or are dropped."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from gateway.calls.chain import Answered, try_chain
from gateway.registry.snapshot import Target
from gateway.upstream import providers
from gateway.upstream.providers.base import BAD_RESPONSE, StreamCut, UpstreamError

CHAT = "chat"


@dataclass
class OpenedReply:
    target: Target
    chunks: AsyncIterator[dict[str, Any]]  # starts with the first chunk
    native: bool = False  # the chunks are the native request's own events (providers.speaks_natively)


async def open_reply(chain: list[Target], body: dict[str, Any], *, refusals_fall_through: bool,
                     native: providers.Native | None = None) -> OpenedReply:
    """On /v1 a provider's refusal falls through to the next model too (spec 7.3, last
    paragraph); elsewhere it is answered at once with the provider's own status. `native`: the
    client's own request, for a server that speaks its format (gateway/upstream/providers/__init__.py)."""

    async def first_chunk(target: Target) -> tuple[dict[str, Any], AsyncIterator[dict[str, Any]]]:
        stream = providers.chat_stream(target, body, native)
        try:
            return await anext(stream), stream
        except StopAsyncIteration:
            raise UpstreamError(BAD_RESPONSE, 502, "The model server returned nothing.") from None

    answered = await try_chain(chain, CHAT, first_chunk, refusals_fall_through=refusals_fall_through, body=body)
    first, rest = answered.result
    answered.result = None  # the reply's generator holds the stream from here
    if answered.reply is not None:
        answered.reply.saw(first)
    chunks = _chain_first(first, rest, answered)
    weakref.finalize(chunks, answered.land)  # a reply dropped unread ends too
    return OpenedReply(answered.target, chunks, providers.speaks_natively(answered.target, native))


async def _chain_first(first: dict[str, Any], rest: AsyncIterator[dict[str, Any]],
                       answered: Answered) -> AsyncIterator[dict[str, Any]]:
    reply, cut_by = answered.reply, None
    try:
        yield first
        async for chunk in rest:
            if reply is not None:
                reply.saw(chunk)
            yield chunk
    except StreamCut as cut:
        cut_by = cut.reason
        raise
    finally:
        answered.land(cut_by)
