"""How Bedrock's failures reach the gateway: an HTTP error by its x-amzn-ErrorType (a refusal, or a failure
another model may take, its retry-after kept), an exception frame before the reply (a failure) and after it (a
cut), a connection dropped midway, a frame whose CRC is wrong; and what is not passed on (the invocation
metrics, the betas Bedrock does not carry)."""

from __future__ import annotations

import struct

import pytest

from gateway.upstream.providers import bedrock
from gateway.upstream.providers.base import StreamCut, UpstreamError
from tests.gateway.upstream.bedrock import eventstream
from tests.gateway.upstream.bedrock.fake import SECRET_KEY
from tests.gateway.upstream.bedrock.support import collect, fake_bedrock, target  # noqa: F401 — a fixture

BODY = {"max_tokens": 50, "messages": [{"role": "user", "content": "one two three four"}]}


def messages(fake, headers: dict | None = None, body: dict | None = None):
    return collect(lambda: bedrock.message_events(target(fake), body or BODY, headers or {}, ""))


@pytest.mark.parametrize(("error", "status", "kind"), [
    ("ThrottlingException", 429, "unavailable"),
    ("ServiceUnavailableException", 503, "unavailable"),
    ("ModelNotReadyException", 429, "unavailable"),
    ("InternalServerException", 500, "unavailable"),
    ("AccessDeniedException", 403, "unavailable"),
    ("UnrecognizedClientException", 403, "unavailable"),
    ("ExpiredTokenException", 403, "unavailable"),
    ("ValidationException", 400, "refused"),
    ("ResourceNotFoundException", 404, "refused"),
])
def test_an_http_error_is_classified_by_its_error_type(fake_bedrock, error, status, kind):  # noqa: F811
    fake_bedrock.configure(fail_error=error, fail_status=status, fail_message=f"{error} said no.", retry_after="7")
    events, failure = messages(fake_bedrock)
    assert events == []
    assert isinstance(failure, UpstreamError)
    assert (failure.kind, failure.status, failure.message, failure.retry_after, failure.answered) == (
        kind, status, f"{error}: {error} said no.", 7.0, True)


def test_an_error_s_words_are_stripped_of_the_credentials(fake_bedrock):  # noqa: F811
    fake_bedrock.configure(fail_error="AccessDeniedException", fail_status=403,
                           fail_message=f"User is not authorized; secret {SECRET_KEY} token sk-ant-api03-abcdefghijk")
    _events, failure = messages(fake_bedrock)
    assert SECRET_KEY not in failure.message and "sk-ant-api03-abcdefghijk" not in failure.message
    assert failure.message.startswith("AccessDeniedException: User is not authorized;")


def test_an_exception_frame_before_the_reply_is_a_failure_another_model_may_take(fake_bedrock):  # noqa: F811
    fake_bedrock.configure(exception_after_tokens=-3, exception_type="throttlingException")  # the first frame
    events, failure = messages(fake_bedrock)
    assert events == []
    assert isinstance(failure, UpstreamError)
    assert (failure.kind, failure.status, failure.message) == (
        "unavailable", 429, "throttlingException: The model stream failed midway.")

    fake_bedrock.configure(exception_after_tokens=-3, exception_type="validationException")
    _events, failure = messages(fake_bedrock)
    assert isinstance(failure, UpstreamError) and (failure.kind, failure.status) == ("refused", 400)


def test_an_exception_frame_midway_is_a_cut_of_an_upstream_error(fake_bedrock):  # noqa: F811
    fake_bedrock.configure(exception_after_tokens=2)
    events, failure = messages(fake_bedrock)
    texts = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert texts == ["Echo: ", "one "]
    assert isinstance(failure, StreamCut)
    assert (failure.reason, failure.message) == ("upstream_error",
                                                 "modelStreamErrorException: The model stream failed midway.")


def test_a_connection_dropped_midway_is_a_cut(fake_bedrock):  # noqa: F811
    fake_bedrock.configure(cut_after_tokens=1)
    events, failure = messages(fake_bedrock)
    assert [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"] == ["Echo: "]
    assert isinstance(failure, StreamCut) and failure.reason == "disconnected"


def test_a_frame_with_a_wrong_crc_is_a_malformed_stream(fake_bedrock, monkeypatch):  # noqa: F811
    real = eventstream.chunk

    def corrupt(event):
        frame = real(event)
        if event["type"] == "content_block_delta":
            return frame[:-4] + struct.pack("!I", 0)
        return frame

    monkeypatch.setattr(eventstream, "chunk", corrupt)
    events, failure = messages(fake_bedrock)
    assert [e["type"] for e in events] == ["message_start", "content_block_start", "ping"]
    assert isinstance(failure, StreamCut) and failure.message == "The model server sent a malformed event stream."


def test_bedrock_s_invocation_metrics_are_not_passed_on(fake_bedrock):  # noqa: F811
    events, failure = messages(fake_bedrock)
    assert failure is None and events[-1] == {"type": "message_stop"}
    assert "ping" not in [e["type"] for e in events[:2]]


def test_betas_go_as_claude_code_sends_them_to_bedrock(fake_bedrock):  # noqa: F811
    """Claude Code in its Anthropic mode sends the header below; in its Bedrock mode it sends claude-code in the
    header, interleaved thinking and tool search (by Bedrock's name) in the body, and no context management."""
    header = ("claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,"
              "thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,files-api-2025-04-14,"
              "interleaved-thinking-2025-05-14")
    body = {**BODY, "model": "aws/claude", "stream": False, "thinking": {"type": "enabled", "budget_tokens": 1024,
                                                                       "display": "omitted"},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}}
    _events, failure = messages(fake_bedrock, {"anthropic-beta": header, "anthropic-version": "2023-06-01"}, body)
    sent = fake_bedrock.requests[-1]
    assert failure is None
    assert sent.json == {**BODY, "thinking": {"type": "enabled", "budget_tokens": 1024},
                         "anthropic_version": "bedrock-2023-05-31",
                         "anthropic_beta": ["interleaved-thinking-2025-05-14", "tool-search-tool-2025-10-19"]}
    assert sent.headers["anthropic-beta"] == "claude-code-20250219" and "anthropic-version" not in sent.headers
    assert "anthropic-beta" in sent.signed and sent.problem is None


def test_a_field_comes_with_its_beta_when_the_server_carries_it(fake_bedrock):  # noqa: F811
    carried = ("context-management-2025-06-27", "thinking-display-updates-2026-08-18")
    body = {**BODY, "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"},
            "context_management": {"edits": []}}
    _events, failure = collect(lambda: bedrock.message_events(
        target(fake_bedrock, anthropic_betas=carried), body, {"anthropic-beta": ",".join(carried)}, ""))
    assert failure is None and fake_bedrock.requests[-1].json == {
        **body, "anthropic_version": "bedrock-2023-05-31", "anthropic_beta": list(carried)}


def test_the_server_s_own_beta_list_replaces_the_documented_one(fake_bedrock):  # noqa: F811
    server_betas = ("token-efficient-tools-2025-02-19",)
    _events, failure = collect(lambda: bedrock.message_events(
        target(fake_bedrock, anthropic_betas=server_betas), BODY,
        {"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,token-efficient-tools-2025-02-19"},
        ""))
    sent = fake_bedrock.requests[-1]
    assert failure is None and sent.json["anthropic_beta"] == ["token-efficient-tools-2025-02-19"]
    assert "anthropic-beta" not in sent.headers
    _events, failure = messages(fake_bedrock, {"anthropic-beta": "prompt-caching-scope-2026-01-05"})
    assert "anthropic_beta" not in fake_bedrock.requests[-1].json  # none carried: no empty list either


@pytest.mark.parametrize(("model", "wire"), [
    ("anthropic.claude-3-5-haiku-20241022-v1:0", "anthropic"),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic"),
    ("global.anthropic.claude-haiku-4-5-20251001-v1:0", "anthropic"),
    ("us-gov.anthropic.claude-3-haiku-20240307-v1:0", "anthropic"),
    ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0", "anthropic"),
    ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", "converse"),
    ("amazon.nova-pro-v1:0", "converse"),
    ("meta.llama3-8b-instruct-v1:0", "converse"),
    ("mistral.anthropic-lookalike", "converse"),
])
def test_a_model_speaks_anthropic_when_its_id_is_a_claude_one(fake_bedrock, model, wire):  # noqa: F811
    assert bedrock.wire(target(fake_bedrock, model)) == wire
