"""The reference upstream model server (tests/upstream), driven by the official SDKs pointed straight at it:
its chat, messages, tool call, embedding, audio and model listing formats. The failure knobs and the
ways to run it are in test_upstream_knobs.py. No database: plain pytest functions."""

from __future__ import annotations

import base64
import io
import json
import math
import struct
import warnings
import wave

import httpx
import openai
import pytest

from tests.gateway.upstream.upstream_support import USER, an, chunks_of, oa, sse_lines
from tests.upstream.fixtures import upstream  # noqa: F401  (the fixture)

WEATHER_OPENAI = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                                      "parameters": {"type": "object", "properties": {}}}},
                  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
WEATHER_ANTHROPIC = [{"name": "get_weather", "description": "Weather in a city",
                      "input_schema": {"type": "object", "properties": {}}}]


# ---- OpenAI chat completions -------------------------------------------------------------------

def test_chat_completion_echoes_the_last_user_message(upstream):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "text", "text": "hello there"},
                                             {"type": "text", "text": "world"}]}]
    result = oa(upstream).chat.completions.create(model="gpt-test", messages=messages)
    assert result.choices[0].message.content == "Echo: hello there world"
    assert result.choices[0].finish_reason == "stop"
    assert result.model == "gpt-test" and result.object == "chat.completion"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.total_tokens) == (7, 4, 11)
    seen = upstream.requests[-1]
    assert seen.path == "/v1/chat/completions" and seen.method == "POST"
    assert seen.headers["authorization"] == "Bearer x"
    assert seen.json["messages"] == messages and json.loads(seen.body) == seen.json
    assert seen["path"] == seen.path  # dict-style access too


def test_streamed_chat_joins_back_to_the_reply_with_a_usage_chunk(upstream):
    upstream.configure(reply="The quick  brown fox.\nDone ")
    stream = oa(upstream).chat.completions.create(model="m", messages=USER, stream=True,
                                                  stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    content = [c for c in chunks[1:] if c.choices]
    assert [c.choices[0].delta.content for c in content] == ["The ", "quick  ", "brown ", "fox.\n", "Done "]
    assert "".join(c.choices[0].delta.content for c in chunks if c.choices) == "The quick  brown fox.\nDone "
    assert [c.choices[0].finish_reason for c in content] == [None] * 4 + ["stop"]
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    assert chunks[-1].usage.prompt_tokens == 3
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1


def test_streamed_chat_on_the_wire(upstream):
    lines, error = sse_lines(upstream, "/v1/chat/completions", {"model": "m", "messages": USER, "stream": True})
    assert error is None
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    chunks = chunks_of(lines)
    assert all("usage" not in c for c in chunks)  # no include_usage: no usage key at all
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_max_tokens_truncates_with_finish_reason_length(upstream):
    client = oa(upstream)
    result = client.chat.completions.create(model="m", messages=USER, max_tokens=2)
    assert result.choices[0].message.content == "Echo: hello "
    assert result.choices[0].finish_reason == "length" and result.usage.completion_tokens == 2
    chunks = list(client.chat.completions.create(model="m", messages=USER, max_completion_tokens=3, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Echo: hello there "
    assert chunks[-1].choices[0].finish_reason == "length"


def test_usage_off_omits_usage_everywhere(upstream):
    upstream.configure(usage=False)
    client = oa(upstream)
    assert client.chat.completions.create(model="m", messages=USER).usage is None
    lines, _ = sse_lines(upstream, "/v1/chat/completions", {"model": "m", "messages": USER, "stream": True,
                                                            "stream_options": {"include_usage": True}})
    assert lines[-1] == "data: [DONE]" and all("usage" not in c for c in chunks_of(lines))
    message = httpx.post(upstream.url + "/v1/messages", json={"model": "c", "max_tokens": 9, "messages": USER}).json()
    assert "usage" not in message and message["content"][0]["text"] == "Echo: hello there world"


def test_bad_requests_get_the_provider_error_shape(upstream):
    with pytest.raises(openai.BadRequestError) as info:
        oa(upstream).chat.completions.create(model="m", messages=[])
    assert info.value.body["param"] == "messages" and info.value.type == "invalid_request_error"
    resp = httpx.post(upstream.url + "/v1/messages", json={"model": "c", "messages": USER})  # no max_tokens
    assert resp.status_code == 400 and resp.json()["error"]["type"] == "invalid_request_error"
    resp = httpx.post(upstream.url + "/v1/chat/completions", content=b"{not json")
    assert resp.status_code == 400 and "error" in resp.json()
    resp = httpx.get(upstream.url + "/v1/nothing-here")
    assert resp.status_code == 404 and resp.json()["error"]["message"].startswith("Unknown request URL")


# ---- Anthropic messages ------------------------------------------------------------------------

def test_anthropic_message_non_streamed(upstream):
    result = an(upstream).messages.create(model="claude-test", max_tokens=100, system="be brief",
                                          messages=[{"role": "user", "content": [{"type": "text", "text": "hi you"}]}])
    assert result.content[0].text == "Echo: hi you" and result.stop_reason == "end_turn"
    assert result.model == "claude-test"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (4, 3)
    seen = upstream.requests[-1]
    assert seen.path == "/v1/messages" and "anthropic-version" in seen.headers
    # anthropic 2.x sends api_key as "Authorization: Bearer", not as X-Api-Key (0.x did)
    assert seen.headers["authorization"] == "Bearer x" and "x-api-key" not in seen.headers


def test_anthropic_stream_and_final_message(upstream):
    upstream.configure(reply="Streaming works fine")
    with an(upstream).messages.stream(model="claude-test", max_tokens=100, messages=USER) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Streaming works fine" and final.content[0].text == text
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 3 and final.usage.input_tokens == 3


def test_anthropic_stream_on_the_wire(upstream):
    lines, error = sse_lines(upstream, "/v1/messages", {"model": "c", "max_tokens": 2, "messages": USER,
                                                        "stream": True})
    assert error is None
    events = [line[7:] for line in lines if line.startswith("event: ")]
    assert events == ["message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
                      "content_block_stop", "message_delta", "message_stop"]
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert [d["type"] for d in data] == events  # the event name matches the data's type
    assert data[6]["delta"]["stop_reason"] == "max_tokens" and data[6]["usage"]["output_tokens"] == 2


def test_anthropic_count_tokens(upstream):
    count = an(upstream).messages.count_tokens(model="c", system="one two", messages=USER)
    assert count.input_tokens == 5


# ---- tool calls --------------------------------------------------------------------------------

def test_openai_tool_call_and_tool_result(upstream):
    upstream.configure(tool_arguments={"city": "Paris", "unit": "C"})
    client = oa(upstream)
    result = client.chat.completions.create(model="m", messages=USER, tools=WEATHER_OPENAI)
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris", "unit": "C"}

    chunks = list(client.chat.completions.create(model="m", messages=USER, tools=WEATHER_OPENAI, stream=True))
    deltas = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices[0].delta.tool_calls]
    assert deltas[0].id.startswith("call_") and deltas[0].function.name == "get_weather" and len(deltas) == 3
    assert json.loads("".join(d.function.arguments for d in deltas)) == {"city": "Paris", "unit": "C"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    upstream.configure(tool_name="get_time")
    named = client.chat.completions.create(model="m", messages=USER, tools=WEATHER_OPENAI)
    assert named.choices[0].message.tool_calls[0].function.name == "get_time"

    followup = USER + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                       {"role": "tool", "tool_call_id": call.id, "content": "18 degrees"}]
    answer = client.chat.completions.create(model="m", messages=followup, tools=WEATHER_OPENAI)
    assert answer.choices[0].message.content == "Tool said: 18 degrees"
    assert answer.choices[0].finish_reason == "stop"


def test_anthropic_tool_use_and_tool_result(upstream):
    upstream.configure(tool_arguments={"city": "Oslo"})
    client = an(upstream)
    result = client.messages.create(model="c", max_tokens=50, messages=USER, tools=WEATHER_ANTHROPIC)
    assert result.stop_reason == "tool_use"
    block = result.content[0]
    assert block.type == "tool_use" and block.name == "get_weather" and block.input == {"city": "Oslo"}

    with client.messages.stream(model="c", max_tokens=50, messages=USER, tools=WEATHER_ANTHROPIC) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use" and final.content[0].input == {"city": "Oslo"}
    assert final.content[0].id.startswith("toolu_")

    followup = USER + [{"role": "assistant", "content": [block.model_dump()]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id,
                                                     "content": [{"type": "text", "text": "cold, -3"}]}]}]
    answer = client.messages.create(model="c", max_tokens=50, messages=followup, tools=WEATHER_ANTHROPIC)
    assert answer.content[0].text == "Tool said: cold, -3" and answer.stop_reason == "end_turn"


# ---- embeddings, audio, models -----------------------------------------------------------------

def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_embeddings_through_the_sdk(upstream):
    texts = ["the cat sat on the mat", "a cat sat on a mat", "quarterly revenue grew strongly"]
    result = oa(upstream).embeddings.create(model="embed-1", input=texts)
    assert upstream.requests[-1].json["encoding_format"] == "base64"  # the SDK asks for base64 and decodes it
    vectors = [d.embedding for d in result.data]
    assert [len(v) for v in vectors] == [64] * 3 and [d.index for d in result.data] == [0, 1, 2]
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5 for v in vectors)
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    assert result.usage.prompt_tokens == 16 and result.model == "embed-1"

    plain = httpx.post(upstream.url + "/v1/embeddings", json={"model": "e", "input": texts[0], "dimensions": 8}).json()
    assert len(plain["data"]) == 1 and len(plain["data"][0]["embedding"]) == 8
    packed = httpx.post(upstream.url + "/v1/embeddings",
                        json={"model": "e", "input": texts[0], "encoding_format": "base64"}).json()
    decoded = struct.unpack("<64f", base64.b64decode(packed["data"][0]["embedding"]))
    assert decoded == pytest.approx(vectors[0])


def test_audio_transcription_translation_and_speech(upstream):
    client = oa(upstream)
    clip = ("clip.wav", b"\x00\x01" * 500 + b"\r\n--not-a-boundary\r\n", "audio/wav")
    result = client.audio.transcriptions.create(model="whisper-1", file=clip)
    assert result.text == "transcribed 1020 bytes of clip.wav"
    text = client.audio.transcriptions.create(model="whisper-1", file=clip, response_format="text")
    assert text.strip() == "transcribed 1020 bytes of clip.wav"
    with warnings.catch_warnings():  # openai 3.x marks translations deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        assert client.audio.translations.create(model="whisper-1", file=clip).text.startswith("transcribed 1020")
    assert upstream.requests[-1].headers["content-type"].startswith("multipart/form-data")

    speech = client.audio.speech.create(model="tts-1", voice="alloy", input="Hello there", response_format="wav")
    audio = speech.read()
    assert audio[:4] == b"RIFF" and audio[8:12] == b"WAVE"
    with wave.open(io.BytesIO(audio)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 8000)
        assert wav.getnframes() == 160 * len("Hello there")
    longer = client.audio.speech.create(model="tts-1", voice="alloy", input="Hello there" * 2).read()
    assert len(longer) - 44 == 2 * (len(audio) - 44)


def test_model_listings(upstream):
    assert [m.id for m in oa(upstream).models.list()] == ["echo-1"]
    upstream.configure(models=["echo-1", "echo-2"])
    assert [m.id for m in oa(upstream).models.list()] == ["echo-1", "echo-2"]
    assert oa(upstream).models.retrieve("echo-2").id == "echo-2"
    assert [m.id for m in an(upstream).models.list()] == ["echo-1", "echo-2"]  # Anthropic shape
    tags = httpx.get(upstream.url + "/api/tags").json()
    assert [m["name"] for m in tags["models"]] == ["echo-1", "echo-2"]
    assert {"model", "modified_at", "size", "digest", "details"} <= tags["models"][0].keys()
