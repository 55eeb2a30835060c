"""Asking a model server from the console whether it answers, through the gateway's
own upstream client and providers (gateway/upstream/), so the console sees what a call would see.

- `connection_test`: the "Test connection" button. A real chat call (or, for a server with embedding
  models only, a real embeddings call) to one of the server's models; the answer, or the exact error:
  the status and the start of the server's own words, without its key (gateway/telemetry/redact.py).
  Its outcome is the server's last success or last failure in its health (gateway/registry/server_health.py).
- `chat_route_problem`: on save. A request to the chat path with a body every server refuses before it
  reaches a model (`messages` that is not a list): a 400 or 422 says the path is there; a 404 or 405 says
  the base URL is wrong (an OpenAI-compatible server's usually ends with /v1), a 401 or 403 that the key
  is. No model runs and nothing is metered.

Both are bounded: the server's connect timeout plus at most CHECK_SECONDS for the answer. Neither
raises: whatever happens becomes the outcome's words.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from gateway.models import Model, ModelServer
from gateway.registry import cooldown, server_health
from gateway.registry.snapshot import Server, Target, server_of
from gateway.telemetry.redact import redact
from gateway.upstream import http_client as upstream_http
from gateway.upstream import providers
from gateway.upstream.providers import anthropic as anthropic_provider
from gateway.upstream.providers.base import StreamCut, UpstreamError, failure_from_response, http_client

logger = logging.getLogger(__name__)

CHECK_SECONDS = 20.0  # at most this long for the answer, after the connection (the server's own timeout if shorter)
ANSWER_CHARS = 200  # of a chat answer, this much is read and shown; then the reply is cut off
PROMPT = "This is a connection test from the model gateway's console. Reply with one short sentence."
BODY_CHARS = 300


@dataclass(frozen=True)
class Outcome:
    ok: bool
    message: str  # one line for the console: what was asked and what came back


def _target(server: Server, model: Model) -> Target:
    return Target(model.pk, f"{server.name}/{model.name}", model.name, server, frozenset(), (), 0,
                  publisher=model.publisher)


def _bound(server: Server) -> float:
    return float(server.connect_timeout) + min(float(server.read_timeout), CHECK_SECONDS)


def _run(coroutine_factory, server: Server):
    """Run a check in an event loop of its own (the console's views are synchronous), bounded, and
    close the connections it opened."""
    async def bounded():
        try:
            return await asyncio.wait_for(coroutine_factory(), _bound(server))
        finally:
            await http_client().aclose()

    return asyncio.run(bounded())


# --- Test connection ----------------------------------------------------------------------------


def connection_test(*, row: ModelServer) -> Outcome:
    """A real call to one model of `row`: its first chat model (by name), else its first embeddings
    model. The server's cooldown is cleared first: the operator asks for a try now."""
    server = server_of(row)
    models = row.models.filter(enabled=True).order_by("name")
    chat = next((m for m in models if m.supports_chat), None)
    embedding = None if chat else next((m for m in models if m.supports_embeddings), None)
    serves_embeddings = hasattr(providers.provider(server), "embeddings")
    if chat is None and (embedding is None or not serves_embeddings):
        takes = "chat or embeddings" if serves_embeddings else "chat"
        return Outcome(False, f"{row.name} has no enabled model that takes {takes}: run 'Discover models', "
                              "or add one below.")
    model = chat or embedding
    target = _target(server, model)
    asked = f"{'Chat' if chat else 'Embeddings'} call to {target.public_id}"
    cooldown.clear(server.id)
    try:
        said = _run(lambda: _chat(target) if chat else _embeddings(target), server)
    except TimeoutError:
        return _failed(server, f"{asked}: no answer within {_bound(server):g} s.")
    except UpstreamError as failure:
        cause = f" ({failure.cooldown_cause})" if failure.cooldown_cause else ""
        return _failed(server, _clean(f"{asked} failed: {failure.status} {failure.message}{cause}", server),
                       refused=_refusal(failure.status))
    except Exception as exc:  # the console answers whatever happens, never a 500
        logger.exception("connection test of server %s failed unexpectedly", row.name)
        return _failed(server, f"{asked} failed unexpectedly ({type(exc).__name__}); the log has the details.")
    server_health.probed(server)
    return Outcome(True, _clean(f"{asked} answered: {said}", server))


def _refusal(status: int | None) -> bool:
    """A 4xx but a timeout or a rate limit: the server refused the request itself (a wrong path, key, model)."""
    return status is not None and 400 <= status < 500 and status not in (408, 429)


def _failed(server: Server, message: str, *, refused: bool = False) -> Outcome:
    """A test that failed is the server's last failure in its health, as a call's would be (a refusal, a
    4xx, as a call's refusal: on record, without making calls avoid the server)."""
    server_health.probed(server, cause=f"Test connection: {message}", refusal=refused)
    return Outcome(False, message)


async def _chat(target: Target) -> str:
    stream = providers.chat_stream(target, {"messages": [{"role": "user", "content": PROMPT}]})
    text = ""
    try:
        async for chunk in stream:
            for choice in chunk.get("choices") or ():
                content = (choice.get("delta") or {}).get("content")
                text += content if isinstance(content, str) else ""
            if len(text) >= ANSWER_CHARS:
                return f"“{text[:ANSWER_CHARS].strip()}…”"
    except StreamCut as cut:
        return f"“{text.strip()}” then the reply stopped: {cut.message}"
    finally:
        await stream.aclose()
    return f"“{text.strip()}”" if text.strip() else "an empty reply"


async def _embeddings(target: Target) -> str:
    body = await providers.embeddings(target, ["ping"])
    try:
        vector = body["data"][0]["embedding"]
        return f"a vector of {len(vector)} numbers"
    except (KeyError, IndexError, TypeError):
        return f"200 but no vector: {json.dumps(body)[:BODY_CHARS]}"


def _clean(text: str, server: Server) -> str:
    return redact(text, [server.api_key] if server.api_key else [])


# --- The chat path on save ------------------------------------------------------------------------


def chat_route_problem(*, row: ModelServer) -> str | None:
    """What is wrong with `row`'s chat path, in words for a warning; None when it answers as a chat
    path does (or cannot be reached: discovery says so already)."""
    server = server_of(row)
    if server.kind not in ("openai", "anthropic"):
        return None  # a cloud's address is its own (Bedrock's region, Azure's resource): discovery and the test say
    model = row.models.filter(enabled=True).order_by("-supports_chat", "name").first()
    if server.kind == "anthropic":
        path = "/v1/messages"
        headers = {"anthropic-version": anthropic_provider.API_VERSION, **({"x-api-key": server.api_key}
                                                                            if server.api_key else {})}
    else:
        path = "/chat/completions"
        headers = {"Authorization": f"Bearer {server.api_key}"} if server.api_key else {}
    body = {"model": model.name if model else "", "messages": "not a list: a route check sends no prompt"}
    request = upstream_http.build_request("POST", f"{server.base_url}{path}", json=body, headers=headers,
                                          timeouts=upstream_http.Timeouts(server.connect_timeout, CHECK_SECONDS))

    async def ask():
        response = await http_client().send(request)
        return response.status_code, await response.aread()

    try:
        status, answer = _run(ask, server)
    except (TimeoutError, upstream_http.HTTPError):
        return None
    except Exception:  # the save is done: a surprise here is logged, never a 500
        logger.exception("chat path check of server %s failed unexpectedly", row.name)
        return None
    words = failure_from_response(status, answer, {}, [server.api_key]).message  # the server's own, redacted
    said = _clean(f"POST {path} answered {status} ({words})", server)
    if status in (404, 405):
        hint = (" An OpenAI-compatible server's base URL usually ends with /v1." if server.kind == "openai"
                and not server.base_url.endswith("/v1") else "")
        return f"{said}: chat calls to this server will fail. Check the base URL.{hint}"
    if status in (401, 403):
        return f"{said}: the server refuses its API key, so chat calls will fail. Check the API key."
    return None
