"""No model server's key leaves the gateway: behind a leaky upstream (its errors
echo the `Authorization` and `x-api-key` it was sent, `leak_credentials`), no response of any
surface, streamed or not, carries the key in its body or headers, and no line of the gateway's
log does. What the server said is still passed on, with `[redacted]` where the key was."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from django.conf import settings

from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.servers import wait_for_quiet_database
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

OA_KEY = "sk-test-SECRET1234567890abcdefXYZ"  # shaped like a key: found by its shape too
AN_KEY = "plainsecretvalueforanthropic"  # no shape at all: only known as the server's key
# what must never be seen, not even in part
LEAKS = ("SECRET1234567890", "secretvalueforanthropic", "sk-test-SECRET")
HELLO = [{"role": "user", "content": "one two three"}]
CHAT_MODELS = ("oa/echo-1", "an/claude-echo")
MCP = "/api/v1/mcp"
MCP_ACCEPT = "application/json, text/event-stream"

# How the leaky upstream fails: refusing (its message is passed on to the caller), failing (the
# chain falls through and is exhausted), breaking its stream before any text, or mid-reply.
FAILURES = {
    "refusal": {"fail_status": 400},
    "key refused": {"fail_status": 401},
    "server error": {"fail_status": 500},
    "error event first": {"error_after_tokens": 0},
    "error event mid-reply": {"error_after_tokens": 2},
}


def leaked(text: str) -> list[str]:
    lowered = text.lower()
    return [leak for leak in LEAKS if leak.lower() in lowered]


@pytest.fixture
def world(transactional_db, live_gateway, upstream):  # noqa: F811
    group = AccountGroupFactory(name="team", api_access=True)
    account = AccountFactory(group=group, email="dev@example.test")
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=5.0, api_key=OA_KEY)
    an = ModelServerFactory(name="an", kind="anthropic", base_url=upstream.url, read_timeout=5.0, api_key=AN_KEY)
    ModelFactory(server=oa, name="echo-1", is_default=True)
    ModelFactory(server=an, name="claude-echo")
    ModelFactory(server=oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    key = api_key_for(account)
    client = httpx.Client(base_url=live_gateway, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    yield SimpleNamespace(base=live_gateway, upstream=upstream, client=client, key=key)
    client.close()
    wait_for_quiet_database()


def exchanges(client: httpx.Client):
    """(what, response, body text) of a request to every surface that reaches a model."""
    def send(what, path, body, stream=False):
        if stream:
            with client.stream("POST", path, json=body) as response:
                text = response.read().decode()
        else:
            response = client.post(path, json=body)
            text = response.text
        return what, response, text

    for model in CHAT_MODELS:
        for stream in (False, True):
            yield send(f"chat completions {model} stream={stream}", "/v1/chat/completions",
                       {"model": model, "messages": HELLO, "stream": stream}, stream)
            yield send(f"responses {model} stream={stream}", "/v1/responses",
                       {"model": model, "input": "one two three", "stream": stream}, stream)
            yield send(f"messages {model} stream={stream}", "/v1/messages",
                       {"model": model, "max_tokens": 50, "messages": HELLO, "stream": stream}, stream)
            yield send(f"native chat {model} stream={stream}", "/api/v1/chat",
                       {"message": "one two three", "model": model, "stream": stream}, stream)
        yield send(f"agent chat {model}", "/api/v1/agent/chat", {"message": "one two three", "model": model})
    yield send("embeddings", "/api/v1/embeddings", {"input": "one two three", "model": "oa/embed-1"})
    yield from mcp_chat(client)


def mcp_chat(client: httpx.Client):
    headers = {"Accept": MCP_ACCEPT}
    started = client.post(MCP, headers=headers, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    headers.update({"Mcp-Session-Id": started.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"})
    for model in CHAT_MODELS:
        response = client.post(MCP, headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "chat", "arguments": {"prompt": "one two three", "model": model}}})
        yield f"mcp chat {model}", response, response.text


def test_the_leaky_upstream_echoes_the_credentials_it_was_sent(upstream):  # noqa: F811
    upstream.configure(leak_credentials=True, fail_status=401)
    r = httpx.post(f"{upstream.url}/v1/chat/completions", json={"model": "echo-1", "messages": HELLO},
                   headers={"Authorization": f"Bearer {OA_KEY}"})
    assert r.status_code == 401 and OA_KEY in r.json()["error"]["message"]
    r = httpx.post(f"{upstream.url}/v1/messages", json={"model": "echo-1", "max_tokens": 5, "messages": HELLO},
                   headers={"x-api-key": AN_KEY, "anthropic-version": "2023-06-01"})
    assert r.status_code == 401 and AN_KEY in r.json()["error"]["message"]
    upstream.configure(fail_status=None, error_after_tokens=1)
    r = httpx.post(f"{upstream.url}/v1/chat/completions", json={"model": "echo-1", "messages": HELLO, "stream": True},
                   headers={"Authorization": f"Bearer {OA_KEY}"})
    assert r.status_code == 200 and OA_KEY in r.text and '"error"' in r.text


@pytest.mark.parametrize("failure", list(FAILURES))
def test_no_surface_shows_the_key(world, failure):
    world.upstream.configure(leak_credentials=True, **FAILURES[failure])
    seen = []
    for what, response, text in exchanges(world.client):
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
        assert not leaked(text), f"{what}: the body carries the key: {text[:2000]}"
        assert not leaked(headers), f"{what}: a header carries the key"
        seen.append((what, response.status_code, text))
    assert len(world.upstream.requests) >= len(CHAT_MODELS) * 4  # the upstream was asked, and leaked
    if failure == "refusal":
        # the server's own words reach the caller, without the key: not a generic message instead
        redacted = [what for what, _status, text in seen if "[redacted]" in text and "Incorrect API key" in text]
        assert any(w.startswith("chat completions") for w in redacted), seen
        assert any(w.startswith("native chat") for w in redacted), seen
        assert any(w.startswith("embeddings") for w in redacted), seen
    if failure == "error event mid-reply":
        cut = [text for what, _status, text in seen if "crashed mid-reply" in text]
        assert cut and all("[redacted]" in text for text in cut), seen


def test_the_gateways_log_does_not_carry_the_key(world):
    """The fall-throughs are logged with the server's words (the process's log file)."""
    port = re.search(r":(\d+)$", world.base).group(1)
    log = Path(settings.VAR_DIR) / f"test-web-{port}.log"
    for failure in ("key refused", "server error", "error event first"):
        world.upstream.reset().configure(leak_credentials=True, **FAILURES[failure])
        for _exchange in exchanges(world.client):
            pass
    text = log.read_text(errors="replace")
    assert "failed:" in text and "[redacted]" in text  # the lines were written, with the key taken out
    assert not leaked(text), [line for line in text.splitlines() if leaked(line)][:5]


def test_a_key_in_a_plain_text_error_or_cut_short_is_found():
    """A body that is not JSON is shown in part: redacted before it is cut. A key cut short by
    the server is found by its pieces."""
    from gateway.upstream.providers.base import failure_from_response

    body = ("x" * 280 + f" bad key {AN_KEY} and again {AN_KEY}").encode()
    failure = failure_from_response(401, body, httpx.Headers(), [AN_KEY])
    assert not leaked(failure.message) and failure.message.startswith("x" * 280)
    payload = json.dumps({"error": {"message": f"no: {AN_KEY[:14]}…"}}).encode()
    message = failure_from_response(401, payload, httpx.Headers(), [AN_KEY]).message
    assert AN_KEY[:14] not in message and message.startswith("no: [redacted]")
