"""The output checks over a reply's chunks, in each of its formats (gateway/calls/screened.py): what a
window holds back is released in later chunks and the rest before the chunk that ends the stream; a
value split across chunks is still caught and never leaves, even in part."""

from __future__ import annotations

import asyncio
import re

import pytest

from gateway.calls.screened import Guard
from gateway.guard import Blocked, Screening, parse_policy
from gateway.guard.texts import ANTHROPIC, CHAT, GEMINI, ReplyScreen

PLACEHOLDER = re.compile(r"<[A-Z_]+_\d+>")
PIECES = ["Your card ", "is 4111 ", "1111 11", "11 1111", " and that", " is all."]
REDACT = [{"check": "pii", "on": "output", "action": "redact", "entities": ["card"]}]
BLOCK = [{"check": "pii", "on": "output", "action": "block", "entities": ["card"]}]


def screen(items, kind) -> ReplyScreen:
    return ReplyScreen(Screening(parse_policy(items), group_name="g", request_id="r"), kind)


def run(coroutine):
    return asyncio.run(coroutine)


async def through(reply: ReplyScreen, chunks: list[dict]) -> list[dict]:
    out = []
    for chunk in chunks:
        out += await reply.chunk(chunk)
    return out + await reply.end()


def chat_chunk(text=None, finish=None, **delta):
    if text is not None:
        delta["content"] = text
    return {"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def chat_text(chunks):
    return [c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")]


def assert_clean(pieces: list[str]):
    for piece in pieces:
        assert "4111" not in piece and "1111" not in piece, pieces
    whole = "".join(pieces)
    assert whole.startswith("Your card is <") and whole.endswith("> and that is all.") and PLACEHOLDER.search(whole)


def test_chat_content_is_rewritten_and_the_rest_released_before_the_finish_chunk():
    out = run(through(screen(REDACT, CHAT), [chat_chunk(p) for p in PIECES] + [chat_chunk(finish="stop")]))
    assert_clean(chat_text(out))
    assert out[-1]["choices"][0]["finish_reason"] == "stop"
    assert out[-2]["choices"][0]["finish_reason"] is None and out[-2]["id"] == "c"  # the release, as a chunk of its own


def test_a_chat_stream_without_a_finish_chunk_releases_the_rest_at_its_end():
    out = run(through(screen(REDACT, CHAT), [chat_chunk(p) for p in PIECES]))
    assert_clean(chat_text(out))


def test_tool_call_arguments_are_checked_per_call():
    chunks = [chat_chunk(tool_calls=[{"index": 0, "function": {"arguments": p}}]) for p in PIECES]
    out = run(through(screen(REDACT, CHAT), [*chunks, chat_chunk(finish="tool_calls")]))
    arguments = [call["function"]["arguments"] for c in out for call in c["choices"][0]["delta"].get("tool_calls", [])]
    assert_clean(arguments)


def test_anthropic_text_deltas_are_released_before_their_blocks_stop():
    deltas = [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}} for p in PIECES]
    events = [{"type": "message_start", "message": {}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, *deltas,
              {"type": "content_block_stop", "index": 0}, {"type": "message_stop"}]
    out = run(through(screen(REDACT, ANTHROPIC), events))
    assert_clean([e["delta"]["text"] for e in out if e["type"] == "content_block_delta"])
    assert [e["type"] for e in out[-3:]] == ["content_block_delta", "content_block_stop", "message_stop"]


def test_gemini_text_parts_get_the_rest_in_the_chunk_that_finishes():
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}]} for p in PIECES]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    out = run(through(screen(REDACT, GEMINI), chunks))
    assert len(out) == len(chunks)
    assert_clean([part["text"] for c in out for part in c["candidates"][0]["content"]["parts"]])


def test_a_block_stops_the_reply_before_any_of_the_value_leaves():
    reply = screen(BLOCK, CHAT)
    sent = []

    async def go():
        for piece in PIECES:
            sent.extend(chat_text(await reply.chunk(chat_chunk(piece))))
        await reply.end()

    with pytest.raises(Blocked) as blocked:
        run(go())
    assert "4111" not in "".join(sent) and "4111" not in blocked.value.message
    assert blocked.value.finding.direction == "output"


def test_a_guard_notes_each_finding_once():
    guard = Guard(Screening(parse_policy(REDACT), group_name="g", request_id="r"))

    async def go():
        return [c async for c in guard.reply(CHAT, _aiter([chat_chunk(p) for p in PIECES]))]

    run(go())
    assert len(guard.screening.findings) == 1


async def _aiter(items):
    for item in items:
        yield item


def test_a_finish_chunk_that_carries_text_keeps_its_order():
    chunks = [chat_chunk(p) for p in PIECES[:-1]] + [chat_chunk(PIECES[-1], finish="stop")]
    out = run(through(screen(REDACT, CHAT), chunks))
    assert_clean(chat_text(out))
    assert out[-1]["choices"][0]["finish_reason"] == "stop" and not out[-1]["choices"][0]["delta"].get("content")
