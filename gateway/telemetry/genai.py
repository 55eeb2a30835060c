"""The spans of model calls, by the OpenTelemetry GenAI semantic conventions: one span per
model of the chain tried, a child of the request's server span (or of a routine run's task span),
named `{gen_ai.operation.name} {gen_ai.request.model}`, of kind CLIENT.

    span = genai.attempt(target, "chat", body)            # before the request (gateway/calls/chain.py)
    first = await genai.within(span, anext(stream))        # the span is the context: the model server
                                                           #   gets its traceparent
    genai.failed(span, "unavailable", status=503, cause="503 busy", next_model="oa/b")   # a fall-through
    reply = genai.answered(span, seconds)                  # the first chunk came: time to first chunk
    reply.saw(chunk) ...; reply.end(cut=None)              # usage, response model, finish reasons

A fall-through, a cooldown skip and a refusal end their attempt's span with an error status, an
`error.type` and an event. A kept reply answering (the response cache) and a budget refusal are
events on the request's span (`cache_hit`, `refused`). Inside a request, the answering attempt's span
is ended when the request ends, with its own end time: only then is it known whether the caller's
group keeps its calls' text (`AccountGroup.capture_calls`), and only then are the prompt and reply put
on it (`gen_ai.input.messages`, `gen_ai.output.messages`), redacted and cut at CALL_CAPTURE_MAX_BYTES."""

from __future__ import annotations

import json
import time
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from gateway.telemetry import logjson, tracing

PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "bedrock": "aws.bedrock", "azure": "azure.ai.openai",
             "vertex": "gcp.vertex_ai", "gemini": "gcp.gemini"}
REQUEST_PARAMETERS = (("max_tokens", "gen_ai.request.max_tokens"),
                      ("max_completion_tokens", "gen_ai.request.max_tokens"),
                      ("temperature", "gen_ai.request.temperature"), ("top_p", "gen_ai.request.top_p"),
                      ("top_k", "gen_ai.request.top_k"), ("seed", "gen_ai.request.seed"))
SKIPPED = "skipped"  # the attempt outcome of a server cooling down (gateway/calls/attempts.py)


@lru_cache(maxsize=256)
def _address(base_url: str) -> tuple[str, int]:
    parts = urlsplit(base_url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def attempt(target, operation: str, body: dict[str, Any] | None = None):
    """The span of one model of the chain, started in the current context (not made current)."""
    from opentelemetry.trace import SpanKind

    host, port = _address(target.server.base_url)
    attributes = {"gen_ai.operation.name": operation,
                  "gen_ai.provider.name": PROVIDERS.get(target.server.kind, target.server.kind),
                  "gen_ai.request.model": target.name, "server.address": host, "server.port": port,
                  "gateway.model": target.public_id, "gateway.server": target.server.name}
    if body:
        for field, name in REQUEST_PARAMETERS:
            value = body.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[name] = value
    return tracing.tracer.start_span(f"{operation} {target.name}", kind=SpanKind.CLIENT, attributes=attributes)


async def within(span, awaitable):
    """Await `awaitable` with `span` as the context's span (a request sent meanwhile carries it)."""
    from opentelemetry import context, trace

    token = context.attach(trace.set_span_in_context(span))
    try:
        return await awaitable
    finally:
        context.detach(token)


def failed(span, outcome: str, *, status: int | None, cause: str, next_model: str | None = None,
           fell_through: bool = False) -> None:
    """The attempt failed before a reply began: `outcome` as the calls log has it (refused,
    unavailable, unreachable, bad_response, skipped); `cause` already without secrets."""
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", outcome)
    if status:
        span.set_attribute("http.response.status_code", status)
    if outcome == SKIPPED:
        span.add_event("gateway.cooldown_skip", {"gateway.cause": cause})
    if fell_through:
        span.add_event("gateway.fall_through", {"gateway.next_model": next_model or ""})
    span.set_status(Status(StatusCode.ERROR, cause))
    span.end()


def answered(span, seconds: float) -> Reply:
    """The first chunk came after `seconds`: the reply that follows is watched by what this returns."""
    span.set_attribute("gen_ai.response.time_to_first_chunk", round(seconds, 6))
    return Reply(span)


class Reply:
    """What the chunks of the answering model tell its span: the model that answered, the token
    counts and the finish reasons (chat chunks, an Anthropic or a Gemini server's own events)."""

    __slots__ = ("span", "model", "response_id", "input_tokens", "output_tokens", "finish_reasons", "ended")

    def __init__(self, span) -> None:
        self.span = span
        self.model = self.response_id = None
        self.input_tokens = self.output_tokens = None
        self.finish_reasons: list[str] = []
        self.ended = False

    def saw(self, chunk: dict[str, Any]) -> None:
        kind = chunk.get("type")
        if kind is None:  # a chat chunk, or a Gemini server's own (its names second)
            if self.model is None:
                self.model, self.response_id = chunk.get("model") or chunk.get("modelVersion"), chunk.get("id")
            for choice in chunk.get("choices") or chunk.get("candidates") or ():
                if isinstance(choice, dict) and (reason := choice.get("finish_reason") or choice.get("finishReason")):
                    self.finish_reasons.append(str(reason))
            if isinstance(usage := chunk.get("usage") or chunk.get("usageMetadata"), dict):
                self.input_tokens = usage.get("prompt_tokens", usage.get("promptTokenCount", self.input_tokens))
                self.output_tokens = usage.get("completion_tokens",
                                               usage.get("candidatesTokenCount", self.output_tokens))
        elif kind == "message_start":
            message = chunk.get("message") or {}
            self.model, self.response_id = message.get("model"), message.get("id")
            self._anthropic_usage(message.get("usage"))
        elif kind == "message_delta":
            reason = (chunk.get("delta") or {}).get("stop_reason")
            if reason:
                self.finish_reasons.append(str(reason))
            self._anthropic_usage(chunk.get("usage"))

    def _anthropic_usage(self, usage) -> None:
        if isinstance(usage, dict):
            if isinstance(usage.get("input_tokens"), int):
                self.input_tokens = usage["input_tokens"] + (usage.get("cache_read_input_tokens") or 0) + (
                    usage.get("cache_creation_input_tokens") or 0)
            if isinstance(usage.get("output_tokens"), int):
                self.output_tokens = usage["output_tokens"]

    def end(self, cut: str | None = None) -> None:
        """The reply ended (`cut`: the reason it stopped midway). Once."""
        if self.ended:
            return
        self.ended = True
        span = self.span
        attributes: dict[str, Any] = {}
        if self.model:
            attributes["gen_ai.response.model"] = str(self.model)
        if self.response_id:
            attributes["gen_ai.response.id"] = str(self.response_id)
        if isinstance(self.input_tokens, int):
            attributes["gen_ai.usage.input_tokens"] = self.input_tokens
        if isinstance(self.output_tokens, int):
            attributes["gen_ai.usage.output_tokens"] = self.output_tokens
        if self.finish_reasons:
            attributes["gen_ai.response.finish_reasons"] = self.finish_reasons
        span.set_attributes(attributes)
        if cut is not None:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", cut)
            span.add_event("gateway.stream_cut", {"gateway.reason": cut})
            span.set_status(Status(StatusCode.ERROR, f"the reply stopped midway: {cut}"))
        finish(span)


def finish(span) -> None:
    """End an answering attempt's span: at once outside a request; inside one, when the request ends
    (`request_ended`), with this end time."""
    exchange = logjson.current.get()
    if exchange is None or exchange.span is None:
        span.end()
    else:
        exchange.answers = [*(exchange.answers or ()), (span, time.time_ns())]


def request_ended(exchange) -> None:
    """The answering attempts' spans of a request that ends, with its text when its group keeps it."""
    answers, exchange.answers = exchange.answers, None
    for span, ended_at in answers or ():
        if exchange.prompt is not None:
            _put_text(span, exchange)
        span.end(end_time=ended_at)


def cache_hit() -> None:
    """A kept reply answers the request (the response cache): no model is asked."""
    from opentelemetry import trace

    span = trace.get_current_span()
    span.set_attribute("gateway.cache.hit", True)
    span.add_event("gateway.cache_hit")


def refused(kind: str, message: str, **attributes: Any) -> None:
    """A refusal by a budget or a token quota, on the span in the context (the request's, a run's)."""
    tracing.event(f"gateway.{kind}_refused", {"gateway.reason": message, **attributes})


def _put_text(span, exchange) -> None:
    """The prompt and the reply as the GenAI conventions put them, redacted, each cut at
    CALL_CAPTURE_MAX_BYTES (only for a group that keeps its calls' text)."""
    from django.conf import settings

    from gateway.telemetry.redact import configured_secrets, redact

    limit = settings.CALL_CAPTURE_MAX_BYTES
    reply = exchange.call.reply if exchange.call is not None else None
    reply = reply() if callable(reply) else reply or ""
    secrets = configured_secrets()
    for name, value in (("gen_ai.input.messages", _input_messages(exchange.prompt)),
                        ("gen_ai.output.messages", [{"role": "assistant",
                                                     "parts": [{"type": "text", "content": reply}]}])):
        text = json.dumps(value, ensure_ascii=False)
        cut = text.encode()[:limit + 256].decode(errors="ignore")  # redacted before the cut: a secret across it
        span.set_attribute(name, redact(cut, secrets).encode()[:limit].decode(errors="ignore"))


def _input_messages(prompt: bytes) -> list[dict[str, Any]]:
    """The request's messages as role and text parts (chat, Messages, Responses, native); its body
    as one text part when it has none."""
    try:
        body = json.loads(prompt)
    except ValueError:
        body = None
    messages = body.get("messages") if isinstance(body, dict) else None
    if messages is None and isinstance(body, dict):
        messages = body.get("input") if isinstance(body.get("input"), list) else (
            [{"role": "user", "content": body["input"]}] if isinstance(body.get("input"), str) else None)
    if not isinstance(messages, list):
        return [{"role": "user", "parts": [{"type": "text", "content": prompt.decode(errors="replace")}]}]
    found = []
    if isinstance(body.get("system"), str):
        found.append({"role": "system", "parts": [{"type": "text", "content": body["system"]}]})
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else ()
        texts = [content] if isinstance(content, str) else [
            block["text"] for block in blocks if isinstance(block, dict) and isinstance(block.get("text"), str)]
        parts = [{"type": "text", "content": text} for text in texts]
        found.append({"role": str(message.get("role", "user")), "parts": parts})
    return found
