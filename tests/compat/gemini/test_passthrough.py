"""A generateContent request to a server that speaks Gemini's format goes as the client sent it and
its own chunks come back (the surface's native way, like /v1/messages to an Anthropic server): in
this process, through the project's ASGI application, with a stand-in for the kind module registered
for the test (its `wire` says `gemini`, its `gemini_events` records the body and answers chunks)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gateway.models import UsageRecord
from gateway.upstream import providers
from gateway.upstream.providers.base import StreamCut
from gateway.usage.writer import usage_writer
from tests.asgi import call
from tests.compat.cache_support import caching
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.telemetry.test_traces import by_kind, exported  # noqa: F401 — a fixture among them

BODY = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}],
        "generationConfig": {"thinkingConfig": {"thinkingBudget": 512, "includeThoughts": True}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]}
CHUNKS = [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "thinking...", "thought": True}]}}],
     "modelVersion": "gemini-2.5-flash", "responseId": "upstream-id"},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello "}]}}],
     "modelVersion": "gemini-2.5-flash", "responseId": "upstream-id"},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "there"}]}, "finishReason": "STOP",
                     "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]}],
     "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "thoughtsTokenCount": 7,
                       "cachedContentTokenCount": 3, "totalTokenCount": 14},
     "modelVersion": "gemini-2.5-flash", "responseId": "upstream-id"},
]


class GeminiKind:
    """The kind module's interface for a `gemini`-wire server, answering CHUNKS (cut after `cut_after`)."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.cut_after: int | None = None

    def wire(self, target) -> str:
        return "gemini"

    async def gemini_events(self, target, body):
        self.bodies.append(body)
        for i, chunk in enumerate(CHUNKS):
            if self.cut_after is not None and i == self.cut_after:
                raise StreamCut("disconnected", "The model server closed the connection.")
            yield json.loads(json.dumps(chunk))

    async def chat_stream(self, target, body, headers=None):
        raise AssertionError("a Gemini request to a Gemini server is not translated")
        yield {}


@pytest.fixture
def world(transactional_db, settings, monkeypatch):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000}
    kind = GeminiKind()
    monkeypatch.setitem(providers._BY_KIND, "gemini", kind)
    group = AccountGroupFactory(api_access=True)
    account = AccountFactory(group=group)
    server = ModelServerFactory(name="gem", kind="gemini", base_url="http://127.0.0.1:9")
    ModelFactory(server=server, name="gemini-2.5-flash")
    return SimpleNamespace(key=api_key_for(account), kind=kind, group=group, account=account)


def post(world, method: str, body=BODY, query: str = "") -> tuple[int, dict, bytes]:
    path = f"/v1beta/models/gem/gemini-2.5-flash:{method}"
    headers = [(b"x-goog-api-key", world.key.encode()), (b"content-type", b"application/json")]
    status, answered, content = call("POST", path + query, headers=headers, body=json.dumps(body).encode())
    return status, {k.decode().lower(): v.decode() for k, v in answered.items()}, content


def usage_records(world, count: int) -> list[UsageRecord]:
    """The account's usage records, written from this process's spool (metered after each answer)."""
    assert usage_writer.flush()
    records = list(UsageRecord.objects.filter(account=world.account).order_by("id"))
    assert len(records) == count
    return records


def sse_chunks(content: bytes) -> list[dict]:
    return [json.loads(frame[6:]) for frame in content.decode().split("\r\n\r\n") if frame.startswith("data: ")]


def test_the_request_goes_as_sent_and_the_reply_is_the_servers_own_gathered(world):
    status, headers, content = post(world, "generateContent")
    assert status == 200, content
    assert world.kind.bodies == [BODY]  # safety settings and thinking budget included: nothing translated
    reply = json.loads(content)
    assert reply["candidates"] == [{
        "content": {"role": "model", "parts": [{"text": "thinking...", "thought": True}, {"text": "Hello there"}]},
        "finishReason": "STOP",
        "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]}]
    assert reply["usageMetadata"] == CHUNKS[-1]["usageMetadata"]
    assert reply["modelVersion"] == "gem/gemini-2.5-flash"
    assert reply["responseId"] != "upstream-id" and headers["x-inference-request-id"].startswith(reply["responseId"])
    [record] = usage_records(world, 1)
    assert (record.surface, record.input_tokens, record.output_tokens) == ("gemini", 5, 9)  # thoughts are output


def test_a_stream_is_the_servers_chunks_with_the_gateways_id_and_model(world):
    status, headers, content = post(world, "streamGenerateContent", query="?alt=sse")
    assert status == 200 and headers["content-type"] == "text/event-stream"
    chunks = sse_chunks(content)
    assert [c["candidates"] for c in chunks] == [c["candidates"] for c in CHUNKS]
    assert {c["modelVersion"] for c in chunks} == {"gem/gemini-2.5-flash"}
    assert len({c["responseId"] for c in chunks}) == 1
    status, headers, content = post(world, "streamGenerateContent")  # without alt=sse: one JSON array
    assert headers["content-type"] == "application/json"
    assert [c["candidates"] for c in json.loads(content)] == [c["candidates"] for c in CHUNKS]
    assert len(usage_records(world, 2)) == 2


def test_a_kept_reply_is_replayed_in_the_servers_own_format(world):
    caching(world.group)
    _, first_headers, first = post(world, "generateContent")
    _, again_headers, again = post(world, "generateContent")
    _, _, streamed = post(world, "streamGenerateContent", query="?alt=sse")
    assert len(world.kind.bodies) == 1
    assert (first_headers["x-cache"], again_headers["x-cache"]) == ("miss", "hit")
    assert json.loads(again)["candidates"] == json.loads(first)["candidates"]
    assert [c["candidates"] for c in sse_chunks(streamed)] == [c["candidates"] for c in CHUNKS]


def test_a_reply_cut_midway_ends_in_googles_error(world):
    world.kind.cut_after = 2
    status, _, content = post(world, "streamGenerateContent", query="?alt=sse")
    chunks = sse_chunks(content)
    assert status == 200 and [c["candidates"] for c in chunks[:2]] == [c["candidates"] for c in CHUNKS[:2]]
    assert chunks[-1] == {"error": {"code": 502, "message": "The model server closed the connection.",
                                    "status": "UNAVAILABLE"}}
    status, _, content = post(world, "generateContent")
    body = json.loads(content)
    assert status == 502 and body["error"]["status"] == "UNAVAILABLE"
    assert body["partial"]["candidates"][0]["content"]["parts"][-1] == {"text": "Hello "}


def test_its_model_call_span_reads_the_servers_own_chunks(world, exported):  # noqa: F811
    post(world, "generateContent")
    [span] = by_kind(exported, "CLIENT")
    attributes = dict(span.attributes)
    assert attributes["gen_ai.response.model"] == "gemini-2.5-flash"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (5, 2)
    assert attributes["gen_ai.response.finish_reasons"] == ("STOP",)
