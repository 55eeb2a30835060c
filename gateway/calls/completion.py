"""A whole, non-streamed chat completion through a chain of models: the assistant message (text
and tool calls), the model that answered and the usage. For the callers that need the reply
before they go on (the agent's tool loop, the gateway's own MCP chat tool).

    completion = await complete(chain, {"messages": [...], "tools": [...]}, refusals_fall_through=False)
    if completion.cut: raise completion_cut_error(completion)

The call is a ModelCall (gateway/calls/model_call.py) with no response cache; its metering is the
caller's (`meter_completion`: an agent meters each round, a routine run under its own key).
Failures before the first byte are raised as the chain raises them (a refusal with its own
status, `ChainExhausted` when every model failed); a reply that stops midway is returned with
`cut` set and what had arrived, so the caller can meter it and answer 504/502 (spec 6.2, 7.2).
When the caller is cancelled mid-reply, the `CancelledError` carries what had arrived in
`partial` (a `Completion`), for the caller to meter.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from gateway.calls.cuts import GUARDED, cut_error
from gateway.calls.metering import cache_write_of, cached_input_of, cost_units_of, meter, usage_of
from gateway.calls.model_call import ModelCall
from gateway.guard import Screening
from gateway.registry.snapshot import Target
from gateway.state.workers import in_worker
from gateway.upstream.providers.base import StreamCut
from gateway.upstream.replies import ReplyAccumulator
from gateway.web.errors import ApiError


@dataclass
class Completion:
    target: Target  # the model that answered
    text: str
    tool_calls: list[dict[str, Any]]  # [{id, type: function, function: {name, arguments}}]
    finish_reason: str
    usage: dict[str, int]  # prompt_tokens, completion_tokens, total_tokens
    cut: StreamCut | None = None  # set when the reply stopped midway
    cached_input_tokens: int = 0  # of the input, what the provider's prompt cache read (priced apart)
    cache_write_input_tokens: int = 0  # of the input, what the provider wrote to its prompt cache (priced apart)

    @property
    def model(self) -> str:
        return self.target.public_id

    @property
    def message(self) -> dict[str, Any]:
        """The assistant message, ready to go back into `messages` for the next round."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
            message["content"] = self.text or None
        return message


async def complete(chain: list[Target], body: dict[str, Any], *, refusals_fall_through: bool,
                   screening: Screening | None = None) -> Completion:
    """`screening`: the guardrails of the caller's group (gateway/calls/screened.py `screening_for`):
    a blocked input raises ApiError 400, a blocked reply comes back cut (`content_policy_violation`)."""
    call = ModelCall(chain, body, refusals_fall_through=refusals_fall_through, screening=screening)
    await call.open()
    try:
        async for _ in call.chunks():
            pass
    except asyncio.CancelledError as cancelled:  # the caller went away mid-reply: what arrived is
        cancelled.partial = _completion(call.target, call.reply, body, None)  # there to meter
        raise
    return _completion(call.target, call.reply, body, call.cut)


def _completion(target: Target, reply: ReplyAccumulator, body: dict[str, Any], cut: StreamCut | None) -> Completion:
    calls = [reply.tool_calls[i] for i in sorted(reply.tool_calls)]
    for index, call in enumerate(calls):
        call["id"] = call["id"] or f"call_{index}"
    return Completion(target=target, text=reply.text, tool_calls=calls,
                      finish_reason=reply.finish_reason or ("tool_calls" if calls else "stop"),
                      usage=usage_of(reply, body), cut=cut, cached_input_tokens=cached_input_of(reply),
                      cache_write_input_tokens=cache_write_of(reply))


async def meter_completion(completion: Completion, *, account_id: int, surface: str, request_id: str,
                           key: str | None = None) -> None:
    """Meter a completion's usage (in a worker thread), shielded from the caller's cancellation:
    usage that happened is metered even when the client has gone. `key`: see `meter`. A reply the
    group's guardrails stopped is not billed."""
    if completion.cut is not None and completion.cut.reason == GUARDED:
        return
    usage = completion.usage

    await asyncio.shield(in_worker(meter)(
        account_id=account_id, model=completion.model, surface=surface, input_tokens=usage["prompt_tokens"],
        output_tokens=usage["completion_tokens"], request_id=request_id, key=key, price=completion.target.price,
        cached_input_tokens=completion.cached_input_tokens,
        cache_write_input_tokens=completion.cache_write_input_tokens))


def completion_cost_units(completion: Completion) -> int:
    """What a completion costs at its model's price (as `meter_completion` records it)."""
    usage = completion.usage
    return cost_units_of(model=completion.model, price=completion.target.price, input_tokens=usage["prompt_tokens"],
                         output_tokens=usage["completion_tokens"], cached_input_tokens=completion.cached_input_tokens,
                         cache_write_input_tokens=completion.cache_write_input_tokens)


def completion_cut_error(completion: Completion) -> ApiError:
    """The error of a reply that stopped midway (gateway/calls/cuts.py), the text that had arrived
    in `partial`."""
    return cut_error(completion.cut, completion.text)
