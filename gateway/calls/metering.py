"""Usage of a call, counted after the reply (never before it): a usage record with the call's cost
(its tokens at the answering model's price), appended to this process's spool
(gateway/usage/writer.py) and so kept whatever dies next, then the account's quota and budget
counters, and the tokens and spend in the metrics and the request's log line
(gateway/telemetry/logjson.py).
A batch line's call (its exchange carries a `BatchUse`, batches/line_call.py) is recorded under the line's
key, so that a line metered twice is one record, at the batch price (the model's batch discount off) and
with its batch's id; its spend is counted apart too (`gateway_batch_spend`, a part of `gateway_spend`).
Metering never raises: the call was answered, and what could not be counted now is counted
later (the spool is written when the database answers; a counter that missed an addition is
rebuilt from the records)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from django.http import HttpResponse
from django.utils import timezone

from gateway.calls.tokens import count_chat_request, count_text
from gateway.limits.quotas import quota_add, quota_add_async
from gateway.models import UsageRecord
from gateway.registry.prices import NO_PRICE, Price
from gateway.registry.snapshot import registry
from gateway.telemetry import call_facts, metrics
from gateway.telemetry.logjson import current
from gateway.upstream.replies import ReplyAccumulator
from gateway.usage.writer import usage_writer

logger = logging.getLogger(__name__)


class BatchUse(NamedTuple):
    """What a batch line's call carries on its exchange (`exchange.batch`, set by batches/line_call.py): its
    batch, and the key its usage record takes, so that a line metered twice (a worker killed between metering
    and saving its answer) is one record."""

    batch_id: str
    key: str


def usage_of(reply: ReplyAccumulator, body: dict) -> dict[str, int]:
    """The server's usage when it gave one; otherwise counted from the request and from what
    was delivered (a reply cut midway counts what arrived)."""
    usage = reply.usage or {}
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    if prompt is None:
        prompt = count_chat_request(body)
    if completion is None:
        completion = count_text(reply.delivered_output_text())
    return {"prompt_tokens": int(prompt), "completion_tokens": int(completion),
            "total_tokens": int(prompt) + int(completion)}


def cached_input_of(reply) -> int:
    """The input tokens the provider read from its prompt cache, as its usage says (chat form:
    `prompt_tokens_details.cached_tokens`, which an Anthropic server's `cache_read_input_tokens` becomes)."""
    return _prompt_detail(reply, "cached_tokens")


def cache_write_of(reply) -> int:
    """The input tokens the provider wrote to its prompt cache, as its usage says (chat form:
    `prompt_tokens_details.cache_write_tokens`, which an Anthropic server's `cache_creation_input_tokens`
    becomes, passed through or translated: gateway/formats/anthropic/replies.py `chat_usage`)."""
    return _prompt_detail(reply, "cache_write_tokens")


def _prompt_detail(reply, name: str) -> int:
    details = (reply.usage or {}).get("prompt_tokens_details")
    count = details.get(name) if isinstance(details, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0


def meter(*, account_id: int, model: str, surface: str, input_tokens: int, output_tokens: int,
          request_id: str = "", key: str | None = None, cached: bool = False, price: Price | None = None,
          cached_input_tokens: int = 0, cache_write_input_tokens: int = 0) -> None:
    """Record a call's usage once, with its cost. `key` makes the record the same record however
    often it is metered (a run: `run-<pk>`); without it each call to meter is a record of its own (an
    agent turn meters each of its rounds under one request id). `cached`: a reply given from the
    response cache (gateway/cache/), its tokens those it delivered; it counts against the token
    quotas like any other (docs/decisions/0109-response-cache.md) and costs nothing. `price`: the
    answering target's (an alias deployment's own where it has one); None: the model's, from this
    process's registry. `cached_input_tokens`, `cache_write_input_tokens`: of the input, those the
    provider's prompt cache read, and those it wrote. Never raises."""
    if (record := _record(account_id, model, surface, input_tokens, output_tokens, request_id, key, cached, price,
                          cached_input_tokens, cache_write_input_tokens)) is not None:
        quota_add(account_id=account_id, tokens=input_tokens + output_tokens, cost_units=record.cost_units,
                  now=record.created_at, record=record.key)  # never raises


async def meter_async(*, account_id: int, model: str, surface: str, input_tokens: int, output_tokens: int,
                      request_id: str = "", key: str | None = None, cached: bool = False,
                      price: Price | None = None, cached_input_tokens: int = 0,
                      cache_write_input_tokens: int = 0) -> None:
    """`meter` from the event loop: the spool append is one write(); the quota counters are
    added to from the loop (gateway/state/redis/loop.py), so no thread is needed. Never raises."""
    if (record := _record(account_id, model, surface, input_tokens, output_tokens, request_id, key, cached, price,
                          cached_input_tokens, cache_write_input_tokens)) is not None:
        await quota_add_async(account_id=account_id, tokens=input_tokens + output_tokens,
                              cost_units=record.cost_units, now=record.created_at, record=record.key)


def cost_units_of(*, model: str, price: Price | None, input_tokens: int, output_tokens: int,
                  cached_input_tokens: int = 0, cache_write_input_tokens: int = 0) -> int:
    """A call's cost in COST_UNITS at `price`, or, when None, at the model's price in this process's
    registry (a model it does not hold costs nothing). Never raises."""
    return price_for(model, price).cost_units(input_tokens=input_tokens, output_tokens=output_tokens,
                                              cached_input_tokens=cached_input_tokens,
                                              cache_write_input_tokens=cache_write_input_tokens)


def price_for(model: str, price: Price | None) -> Price:
    """`price`, or, when None, the model's price in this process's registry (NO_PRICE for a model it does not
    hold, or when it cannot be read). Never raises."""
    if price is not None:
        return price
    try:
        target = registry().by_public_id.get(model)
    except Exception:  # the registry cannot be read now: the call is still metered, at no price
        logger.exception("the price of %s could not be read; its call is metered at no cost", model)
        target = None
    return target.price if target is not None else NO_PRICE


def _record(account_id, model, surface, input_tokens, output_tokens, request_id, key, cached, price,
            cached_input_tokens, cache_write_input_tokens) -> UsageRecord | None:
    """Append the usage record to the spool; the record, or None when there is nothing to count. The
    cache reads and writes are cut to what the input holds (the reads first), as they are priced. A batch
    line's record (the exchange's `batch`) takes the line's key unless the caller gave one, and costs the
    batch price."""
    total = input_tokens + output_tokens
    if total <= 0:
        return None
    cached_input_tokens = min(max(int(cached_input_tokens or 0), 0), input_tokens)
    cache_write_input_tokens = min(max(int(cache_write_input_tokens or 0), 0), input_tokens - cached_input_tokens)
    exchange = current.get()
    batch = exchange.batch if exchange is not None else None
    cost_units = 0
    if not cached:
        price = price_for(model, price)
        cost_units = price.cost_units(input_tokens=input_tokens, output_tokens=output_tokens,
                                      cached_input_tokens=cached_input_tokens,
                                      cache_write_input_tokens=cache_write_input_tokens)
        if batch is not None:
            cost_units = price.batch_cost_units(cost_units)
    metrics.tokens(model, input_tokens, output_tokens)
    metrics.spend(model, cost_units, batch=batch is not None)
    if cached:
        metrics.cache_hit(model, input_tokens, output_tokens)
    if exchange is not None:  # the request's log line and its calls log row name them (the batch price, billed)
        exchange.metered(model, input_tokens, output_tokens, cost_units, cached)
    record = UsageRecord(
        account_id=account_id, model=model, surface=surface, input_tokens=input_tokens,
        output_tokens=output_tokens, request_id=request_id[:64],
        key=(key or (batch.key if batch is not None else None) or uuid.uuid4().hex)[:80],
        cached=cached, cached_input_tokens=cached_input_tokens, cache_write_input_tokens=cache_write_input_tokens,
        cost_units=cost_units, created_at=timezone.now(),
        tags=call_facts.tags_of(exchange),  # the call's tags, as its row in the calls log has them
        batch_id=batch.batch_id[:40] if batch is not None else "",
    )
    try:
        usage_writer.submit(record)
    except Exception:  # submit keeps what it can and logs; this is the last guard of an answered call
        logger.exception("usage of account %s not recorded (%s, %s tokens)", account_id, model, total)
    return record


class AfterSendResponse(HttpResponse):
    """Runs `after_send` when Django closes the response: after its body has gone out. The hot
    routes' handler (gateway/web/hotpath.py) first awaits `after_send_in_loop`, from the event loop."""

    def __init__(self, content, *, after_send: Callable[[], None],
                 after_send_async: Callable[[], Awaitable[None]] | None = None, **kwargs) -> None:
        super().__init__(content, **kwargs)
        self._after_send = after_send
        self._after_send_async = after_send_async

    def close(self) -> None:
        after_send, self._after_send = self._after_send, None
        try:
            if after_send is not None:
                after_send()
        finally:
            super().close()

    async def after_send_in_loop(self) -> None:
        """The after-send step awaited in the event loop, when it has an async form (`close`
        then skips it)."""
        if self._after_send_async is not None:
            self._after_send = None
            await self._after_send_async()
