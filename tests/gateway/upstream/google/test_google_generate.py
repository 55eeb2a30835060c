"""The transport around the Gemini translation (gateway/formats/gemini/, written beside it): the chat form
goes out as the translation makes it, each streamed chunk is fed to the translator and its chat chunks come
back, its closing chunks after the last; a field the translation could not carry is refused by name before any
call; embeddings go to `batchEmbedContents` (the Gemini API) or `predict` (Vertex AI), in batches. Driven here
by a small translator of the test's own, so the transport is held whatever the translation does."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gateway.upstream.providers.base import StreamCut, UpstreamError
from gateway.upstream.providers.google import embeddings, gemini, generate, vertex
from tests.gateway.upstream.google.fake import GEMINI
from tests.gateway.upstream.google.support import (  # noqa: F401 — fixtures
    collect,
    fake_google,
    gemini_target,
    key_file,
    vertex_target,
)

seen_models: list[str] = []


def chat_to_gemini_request(body: dict[str, Any], *, lost: list[str]) -> dict[str, Any]:
    seen_models.append(body.get("model"))
    lost += [name for name in ("logit_bias",) if name in body]
    return {"contents": [{"role": "user", "parts": [{"text": m["content"]}]} for m in body["messages"]],
            "generationConfig": {"maxOutputTokens": body.get("max_tokens", 100)}}


class GeminiToChatStream:
    def __init__(self, completion_id: str, model: str, created: int, include_usage: bool = True,
                 output_tool: str | None = None) -> None:
        self.id, self.model, self.finished, self.usage, self.reason = completion_id, model, False, None, None

    def chunk(self, delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": 0, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}

    def feed(self, response: dict[str, Any]) -> list[dict[str, Any]]:
        if "candidates" not in response:
            raise ValueError("not a GenerateContentResponse")
        candidate = response["candidates"][0]
        self.usage = response.get("usageMetadata")
        self.reason = candidate.get("finishReason")
        self.finished = self.reason is not None
        text = "".join(part.get("text", "") for part in candidate["content"]["parts"])
        return [self.chunk({"content": text})] if text else []

    def end(self) -> list[dict[str, Any]]:
        return [self.chunk({}, {"STOP": "stop", "MAX_TOKENS": "length"}[self.reason]),
                {**self.chunk({}), "choices": [], "usage": {"prompt_tokens": self.usage["promptTokenCount"],
                                                            "completion_tokens": self.usage["candidatesTokenCount"],
                                                            "total_tokens": self.usage["totalTokenCount"]}}]


def embed_request(texts: list[str], *, model: str, vertex: bool) -> dict[str, Any]:
    if vertex:
        return {"instances": [{"content": text} for text in texts]}
    return {"requests": [{"model": f"models/{model}", "content": {"parts": [{"text": text}]}} for text in texts]}


def embeddings_reply(data: dict[str, Any], *, model: str, vertex: bool) -> dict[str, Any]:
    vectors = ([p["embeddings"]["values"] for p in data["predictions"]] if vertex
               else [e["values"] for e in data["embeddings"]])
    tokens = sum(p["embeddings"]["statistics"]["token_count"] for p in data["predictions"]) if vertex else None
    return {"object": "list", "model": model, "data": [{"object": "embedding", "index": i, "embedding": v}
                                                       for i, v in enumerate(vectors)],
            **({"usage": {"prompt_tokens": tokens, "total_tokens": tokens}} if tokens is not None else {})}


@pytest.fixture(autouse=True)
def translation(monkeypatch):
    own = SimpleNamespace(chat_to_gemini_request=chat_to_gemini_request, GeminiToChatStream=GeminiToChatStream,
                          gemini_output_tool=lambda body: None, embed_request=embed_request,
                          embeddings_reply=embeddings_reply)
    monkeypatch.setattr(generate, "gemini", own)
    monkeypatch.setattr(embeddings, "gemini", own)


BODY = {"model": "gem/x", "messages": [{"role": "user", "content": "one two three"}], "max_tokens": 2}


@pytest.mark.parametrize("kind", ["gemini", "vertex"])
def test_the_chat_form_goes_out_translated_and_comes_back_as_the_translator_s_chunks(fake_google, key_file,  # noqa: F811
                                                                                    kind):
    target = gemini_target(fake_google) if kind == "gemini" else vertex_target(fake_google, key_file, GEMINI)
    module = gemini if kind == "gemini" else vertex
    chunks, error = collect(lambda: module.chat_stream(target, BODY))
    assert error is None
    assert [c["choices"][0]["delta"] for c in chunks[:-2]] == [{"content": "Echo: "}, {"content": "one "}]
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    sent = fake_google.calls()[-1]
    assert seen_models[-1] == GEMINI  # the translation is told the model's own name, not the client's
    assert sent.json == chat_to_gemini_request(BODY, lost=[]) and sent.query == "alt=sse"
    assert sent.path.endswith(f"/models/{GEMINI}:streamGenerateContent")


def test_a_field_gemini_cannot_carry_is_refused_by_name_before_any_call(fake_google):  # noqa: F811
    chunks, error = collect(lambda: gemini.chat_stream(gemini_target(fake_google), {**BODY, "logit_bias": {"1": 2}}))
    assert isinstance(error, UpstreamError) and (error.kind, error.status) == ("refused", 400)
    assert "'logit_bias'" in error.message and not fake_google.requests


def test_a_cut_after_the_first_chunk_is_a_stream_cut(fake_google):  # noqa: F811
    fake_google.configure(cut_after_tokens=1)
    chunks, error = collect(lambda: gemini.chat_stream(gemini_target(fake_google), {**BODY, "max_tokens": 50}))
    assert [c["choices"][0]["delta"] for c in chunks] == [{"content": "Echo: "}]
    assert isinstance(error, StreamCut) and error.reason == "disconnected"


def run(coroutine_factory):
    import asyncio

    from gateway.upstream.providers.base import http_client

    async def go():
        try:
            return await coroutine_factory()
        finally:
            await http_client().aclose()

    return asyncio.run(go())


def test_embeddings_on_the_gemini_api_go_to_batch_embed_contents_in_batches(fake_google, monkeypatch):  # noqa: F811
    monkeypatch.setattr(embeddings, "GEMINI_BATCH", 2)
    reply = run(lambda: gemini.embeddings(gemini_target(fake_google, "gemini-embedding-001"), ["a", "bb", "ccc"]))
    assert [(d["index"], d["embedding"][0]) for d in reply["data"]] == [(0, 1.0), (1, 2.0), (2, 3.0)]
    assert "usage" not in reply
    assert [(c.path, len(c.json["requests"])) for c in fake_google.calls()] == [
        ("/v1beta/models/gemini-embedding-001:batchEmbedContents", 2),
        ("/v1beta/models/gemini-embedding-001:batchEmbedContents", 1)]


def test_embeddings_on_vertex_ai_go_to_predict_with_their_token_count(fake_google, key_file):  # noqa: F811
    target = vertex_target(fake_google, key_file, "text-embedding-005")
    reply = run(lambda: vertex.embeddings(target, ["one two", "three"]))
    assert [d["embedding"][0] for d in reply["data"]] == [7.0, 5.0]
    assert reply["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    [call] = fake_google.calls()
    assert call.path.endswith("/publishers/google/models/text-embedding-005:predict")
    assert call.json == {"instances": [{"content": "one two"}, {"content": "three"}]}
    gemini_embedding = vertex_target(fake_google, key_file, "gemini-embedding-001")
    assert embeddings.batch_size(gemini_embedding) == 1  # Gemini's embedding model takes one instance a call
