"""The transport of a model that is not Claude (ConverseStream): the chat form goes to
`/model/{id}/converse-stream` signed, and Converse's frames reach the translator by event type. The translation
itself is gateway/formats/converse/'s; until it is there such a model is refused by name, and the transport is
tested here with a translator of the test's own (it echoes what it is fed into chat chunks)."""

from __future__ import annotations

import pytest

from gateway.upstream.providers import bedrock
from gateway.upstream.providers.base import StreamCut, UpstreamError
from gateway.upstream.providers.bedrock import converse
from tests.gateway.upstream.bedrock.support import collect, fake_bedrock, target  # noqa: F401 — a fixture

NOVA = "amazon.nova-lite-v1:0"
CHAT = {"messages": [{"role": "user", "content": "hello nova"}], "temperature": 0.5}


class EchoTranslator:
    """Each Converse event as one chat chunk holding its type and payload; finished at `metadata`."""

    def __init__(self, **context):
        self.context, self.finished, self.fed = context, False, []

    def feed(self, event_type: str, payload: dict) -> list[dict]:
        self.fed.append(event_type)
        self.finished = event_type == "metadata"
        text = payload.get("delta", {}).get("text", "")
        return [{"id": self.context["completion_id"], "object": "chat.completion.chunk",
                 "created": self.context["created"], "model": self.context["model"],
                 "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}]


def to_converse(body: dict, lost: list[str]) -> dict:
    lost += [key for key in body if key not in ("messages", "temperature")]
    return {"messages": [{"role": m["role"], "content": [{"text": m["content"]}]} for m in body["messages"]],
            "inferenceConfig": {"temperature": body.get("temperature")}}


@pytest.fixture
def translator(monkeypatch):
    made: list[EchoTranslator] = []

    def make(**context):
        made.append(EchoTranslator(**context))
        return made[-1]

    monkeypatch.setattr(converse, "chat_to_converse_request", to_converse)
    monkeypatch.setattr(converse, "ConverseToChatStream", make)
    return made


def test_a_converse_model_is_refused_by_name_until_its_translation_is_there(fake_bedrock, monkeypatch):  # noqa: F811
    monkeypatch.setattr(converse, "chat_to_converse_request", None)
    chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), CHAT))
    assert chunks == [] and not fake_bedrock.requests
    assert isinstance(failure, UpstreamError) and (failure.kind, failure.status) == ("refused", 400)
    assert failure.message == (f"The model '{NOVA}' on server 'aws' is not a Claude model: Bedrock's Converse "
                               "models are not served yet.")


def test_the_chat_form_goes_to_converse_stream_signed_and_its_frames_to_the_translator(
        fake_bedrock, translator):  # noqa: F811
    chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), CHAT))
    assert failure is None
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == "Echo: hello nova"
    [made] = translator
    assert made.fed == ["messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockDelta",
                        "contentBlockStop", "messageStop", "metadata"]
    assert made.context["model"] == NOVA
    sent = fake_bedrock.requests[-1]
    assert sent.raw_path == "/model/amazon.nova-lite-v1%3A0/converse-stream"
    assert sent.json == to_converse(CHAT, [])
    assert (sent.auth, sent.problem) == ("sigv4", None)


def test_a_field_converse_cannot_carry_is_refused_by_name(fake_bedrock, translator):  # noqa: F811
    chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), {**CHAT, "logit_bias": {"1": 2}}))
    assert isinstance(failure, UpstreamError) and failure.kind == "refused" and "'logit_bias'" in failure.message
    assert not fake_bedrock.requests


def test_converse_failures_are_bedrock_s(fake_bedrock, translator):  # noqa: F811
    fake_bedrock.configure(fail_error="ThrottlingException", fail_status=429, fail_times=1)
    _chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), CHAT))
    assert isinstance(failure, UpstreamError) and (failure.kind, failure.status) == ("unavailable", 429)
    fake_bedrock.configure(exception_after_tokens=1)
    chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), CHAT))
    assert isinstance(failure, StreamCut) and failure.reason == "upstream_error"
    assert [c["choices"][0]["delta"]["content"] for c in chunks] == ["", "Echo: "]
