"""Google's failures as the chain reads them: by the status name of Google's error body, the words passed on
(never a credential), when to try again (Retry-After, else RetryInfo), a key refused as a key (not as a bad
request); an error sent in place of a chunk and a connection dropped midway end a stream that had begun as a
cut (StreamCut), and before it as the server's failure."""

from __future__ import annotations

import pytest

from gateway.upstream.providers.base import StreamCut, UpstreamError
from gateway.upstream.providers.google import gemini, vertex
from tests.gateway.upstream.google.support import (  # noqa: F401 — fixtures
    collect,
    fake_google,
    gemini_target,
    key_file,
    vertex_target,
)

GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "one two three four"}]}]}
CLAUDE_BODY = {"max_tokens": 20, "messages": [{"role": "user", "content": "one two three four"}]}


@pytest.mark.parametrize(("name", "code", "kind"), [
    ("RESOURCE_EXHAUSTED", 429, "unavailable"), ("UNAVAILABLE", 503, "unavailable"), ("INTERNAL", 500, "unavailable"),
    ("DEADLINE_EXCEEDED", 504, "unavailable"), ("PERMISSION_DENIED", 403, "unavailable"),
    ("UNAUTHENTICATED", 401, "unavailable"), ("INVALID_ARGUMENT", 400, "refused"), ("NOT_FOUND", 404, "refused"),
    ("FAILED_PRECONDITION", 400, "refused")])
def test_a_failure_is_classed_by_google_s_status_name(fake_google, name, code, kind):  # noqa: F811
    fake_google.configure(fail_status=name, fail_code=code, fail_message="Quota exceeded for aiplatform.")
    events, error = collect(lambda: gemini.gemini_events(gemini_target(fake_google), GEMINI_BODY))
    assert isinstance(error, UpstreamError) and not events
    assert (error.kind, error.status, error.answered) == (kind, code, True)
    assert error.message == f"{name}: Quota exceeded for aiplatform."


def test_when_to_try_again_is_kept_from_the_header_or_from_retry_info(fake_google, key_file):  # noqa: F811
    fake_google.configure(fail_status="RESOURCE_EXHAUSTED", retry_after="7")
    _events, error = collect(lambda: vertex.message_events(vertex_target(fake_google, key_file), CLAUDE_BODY, {}, ""))
    assert (error.kind, error.status, error.retry_after) == ("unavailable", 429, 7.0)
    fake_google.configure(retry_after=None, fail_details=[
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "36s"}])
    _events, error = collect(lambda: gemini.gemini_events(gemini_target(fake_google), GEMINI_BODY))
    assert (error.kind, error.status, error.retry_after) == ("unavailable", 429, 36.0)


def test_a_wrong_gemini_api_key_is_a_key_refused_not_a_bad_request(fake_google):  # noqa: F811
    _events, error = collect(lambda: gemini.gemini_events(gemini_target(fake_google, api_key="AIzaWrongKey01"),
                                                          GEMINI_BODY))
    assert (error.kind, error.status) == ("unavailable", 401)
    assert error.message == "INVALID_ARGUMENT: API key not valid. Please pass a valid API key."
    assert "AIzaWrongKey01" not in str(error)


def test_an_error_chunk_midway_is_a_cut_and_before_any_chunk_the_server_s_failure(fake_google):  # noqa: F811
    fake_google.configure(error_after_tokens=2)
    events, error = collect(lambda: gemini.gemini_events(gemini_target(fake_google), GEMINI_BODY))
    assert [e["candidates"][0]["content"]["parts"][0]["text"] for e in events] == ["Echo: ", "one "]
    assert isinstance(error, StreamCut) and error.reason == "upstream_error"
    assert error.message == "UNAVAILABLE: The model is overloaded. Please try again later."
    fake_google.configure(error_after_tokens=0)
    events, error = collect(lambda: gemini.gemini_events(gemini_target(fake_google), GEMINI_BODY))
    assert not events and isinstance(error, UpstreamError) and (error.kind, error.status) == ("unavailable", 503)


@pytest.mark.parametrize("kind", ["gemini", "claude"])
def test_a_connection_dropped_midway_is_a_cut(fake_google, key_file, kind):  # noqa: F811
    fake_google.configure(cut_after_tokens=2)
    if kind == "gemini":
        events, error = collect(lambda: gemini.gemini_events(gemini_target(fake_google), GEMINI_BODY))
        assert len(events) == 2
    else:
        events, error = collect(lambda: vertex.message_events(vertex_target(fake_google, key_file), CLAUDE_BODY,
                                                              {}, ""))
        assert [e["type"] for e in events][-1] == "content_block_delta"
    assert isinstance(error, StreamCut) and error.reason == "disconnected"


def test_claude_on_vertex_answers_the_chat_form_through_the_anthropic_translation(fake_google, key_file):  # noqa: F811
    body = {"model": "gcp/x", "messages": [{"role": "user", "content": "one two"}], "max_tokens": 20}
    chunks, error = collect(lambda: vertex.chat_stream(vertex_target(fake_google, key_file), body))
    assert error is None
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "Echo: one two"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    sent = fake_google.calls()[-1].json
    assert sent["anthropic_version"] == "vertex-2023-10-16" and sent["stream"] is True and "model" not in sent
