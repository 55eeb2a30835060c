"""Google access tokens for Vertex AI (gateway/registry/google_auth.py): asked of the token endpoint the service
account's key names, with an assertion signed by its key; kept per credential and used by every call until
shortly before they expire (never fetched per call); a key the endpoint refuses is the server's failure (401,
naming the server, nothing sent to the model); the tokens never reach a log line. The Gemini API's key goes in
its header, never in the URL."""

from __future__ import annotations

import asyncio

from gateway.registry import google_auth
from gateway.telemetry.redact import configured_secrets, redact
from gateway.upstream.providers.base import UpstreamError, http_client
from gateway.upstream.providers.google import gemini, vertex
from tests.gateway.upstream.google import keys
from tests.gateway.upstream.google.support import (  # noqa: F401 — fixtures
    collect,
    fake_google,
    gemini_target,
    key_file,
    vertex_target,
)

BODY = {"max_tokens": 20, "messages": [{"role": "user", "content": "one two"}]}


def call(target) -> tuple[list, Exception | None]:
    return collect(lambda: vertex.message_events(target, BODY, {}, ""))


def test_one_token_serves_every_call_until_it_is_near_its_end(fake_google, key_file):  # noqa: F811
    target = vertex_target(fake_google, key_file)
    for _ in range(3):
        events, error = call(target)
        assert error is None and events[-1]["type"] == "message_stop"
    assert len(fake_google.token_requests()) == 1
    assert len({c.headers["authorization"] for c in fake_google.calls()}) == 1


def test_a_token_within_five_minutes_of_its_end_is_replaced_before_the_call(fake_google, key_file):  # noqa: F811
    fake_google.configure(token_lifetime=240)
    target = vertex_target(fake_google, key_file)
    for _ in range(2):
        assert call(target)[1] is None
    assert len(fake_google.token_requests()) == 2
    assert [c.problem for c in fake_google.calls()] == [None, None]


def test_calls_made_together_share_one_fetch(fake_google, key_file):  # noqa: F811
    target = vertex_target(fake_google, key_file)

    async def together():
        try:
            return await asyncio.gather(*(google_auth.token(target.server) for _ in range(5)))
        finally:
            await http_client().aclose()

    tokens = asyncio.run(together())
    assert len(set(tokens)) == 1 and len(fake_google.token_requests()) == 1


def test_a_key_the_token_endpoint_does_not_verify_is_the_server_s_failure(fake_google, key_file, tmp_path):  # noqa: F811
    impostor = keys.account("impostor")  # the same account's name, another key
    wrong = keys.key_file(tmp_path, impostor, f"{fake_google.url}/token", name="wrong.json")
    events, error = call(vertex_target(fake_google, wrong))
    assert fake_google.token_requests()[-1].problem == "the signature does not verify"
    assert isinstance(error, UpstreamError) and (error.kind, error.status) == ("unavailable", 401)
    assert error.message.startswith(f"Google gave no access token for server 'gcp' (the service account of {wrong}): ")
    assert "invalid_grant" in error.message
    assert not fake_google.calls() and not events


def test_a_missing_key_file_is_the_server_s_failure_too(fake_google, tmp_path):  # noqa: F811
    _events, error = call(vertex_target(fake_google, str(tmp_path / "nowhere.json")))
    assert isinstance(error, UpstreamError) and (error.kind, error.status) == ("unavailable", 401)
    assert "nowhere.json" in error.message and not fake_google.requests


def test_the_token_never_reaches_a_log_line(fake_google, key_file):  # noqa: F811
    assert call(vertex_target(fake_google, key_file))[1] is None
    token = fake_google.calls()[-1].headers["authorization"].removeprefix("Bearer ")
    assert token in google_auth.tokens() and token in configured_secrets()
    assert redact(f"sent {token}", configured_secrets()) == "sent [redacted]"


def test_the_gemini_api_key_goes_in_its_header_and_without_one_nothing_is_sent(fake_google):  # noqa: F811
    body = {"contents": [{"role": "user", "parts": [{"text": "one two"}]}]}
    events, error = collect(lambda: gemini.gemini_events(gemini_target(fake_google), body))
    assert error is None and "".join(e["candidates"][0]["content"]["parts"][0]["text"] for e in events) == \
        "Echo: one two"
    sent = fake_google.calls()[-1]
    assert sent.headers["x-goog-api-key"] == "AIzaFakeGeminiKey0000000000000000000001"
    assert "key=" not in sent.query and sent.problem is None
    _events, error = collect(lambda: gemini.gemini_events(gemini_target(fake_google, api_key=""), body))
    assert isinstance(error, UpstreamError) and (error.kind, error.status) == ("unavailable", 401)
    assert len(fake_google.requests) == 1


def test_without_a_key_file_application_default_credentials_are_used(fake_google, key_file, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", key_file)
    events, error = call(vertex_target(fake_google, ""))
    assert error is None and events[-1]["type"] == "message_stop"
    assert [r.problem for r in fake_google.token_requests()] == [None]
    assert fake_google.calls()[-1].problem is None


def test_without_any_credentials_the_server_is_unavailable_and_nothing_is_sent(fake_google, tmp_path,  # noqa: F811
                                                                              monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    _events, error = call(vertex_target(fake_google, ""))
    assert isinstance(error, UpstreamError) and (error.kind, error.status) == ("unavailable", 401)
    assert error.message.startswith("Google gave no access token for server 'gcp' (Application Default Credentials): ")
    assert not fake_google.requests
