"""A translated Gemini reply that stops midway, a server's failure, and the reply cache, through the
running gateway with the google-genai SDK and plain HTTP."""

import json

import httpx
import pytest
from google.genai import errors

from tests.compat.cache_support import caching, model_calls
from tests.servers import wait_for_usage

BODY = {"contents": [{"role": "user", "parts": [{"text": "one two three"}]}]}


def post(world, path: str, body=BODY) -> httpx.Response:
    return httpx.post(f"{world.base}{path}", json=body, headers={"x-goog-api-key": world.key}, timeout=30)


@pytest.mark.parametrize("model", ["oa/echo-1", "an/claude-echo"])
def test_a_stream_cut_midway_ends_in_googles_error_which_the_sdk_raises(world, gemini, model):
    world.upstream.configure(cut_after_tokens=2)
    received = []
    with pytest.raises(errors.ServerError) as exc:
        for chunk in gemini.models.generate_content_stream(model=model, contents="one two three"):
            received.append(chunk.text or "")
    assert "".join(received) == "Echo: one "
    assert (exc.value.code, exc.value.status) == (502, "UNAVAILABLE")
    record = wait_for_usage(world.account)[0]
    assert record.output_tokens > 0 and record.surface == "gemini"  # what arrived is metered


def test_a_whole_reply_cut_midway_is_502_with_the_partial_reply(world):
    world.upstream.configure(cut_after_tokens=3)
    response = post(world, "/v1beta/models/an/claude-echo:generateContent")
    assert response.status_code == 502
    body = response.json()
    assert body["error"]["status"] == "UNAVAILABLE"
    assert body["partial"]["candidates"][0]["content"]["parts"] == [{"text": "Echo: one two "}]


def test_without_alt_sse_the_stream_is_one_json_array(world):
    response = post(world, "/v1beta/models/oa/echo-1:streamGenerateContent")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    chunks = json.loads(response.text)
    assert "".join(p["text"] for c in chunks for p in c["candidates"][0]["content"]["parts"]) == "Echo: one two three"
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


def test_a_failing_server_is_googles_unavailable(world, gemini):
    world.upstream.configure(fail_status=500)
    with pytest.raises(errors.ServerError) as exc:
        gemini.models.generate_content(model="oa/echo-1", contents="hi")
    assert (exc.value.code, exc.value.status) == (503, "UNAVAILABLE")


def test_a_kept_reply_answers_again_whole_or_streamed(world, gemini):
    caching(world.group)
    first = post(world, "/v1beta/models/oa/echo-1:generateContent")
    again = post(world, "/v1beta/models/oa/echo-1:generateContent")
    streamed = post(world, "/v1beta/models/oa/echo-1:streamGenerateContent?alt=sse")
    assert (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit")
    assert again.json()["candidates"] == first.json()["candidates"]
    frames = [json.loads(f[6:]) for f in streamed.text.split("\r\n\r\n") if f.startswith("data: ")]
    assert "".join(p["text"] for f in frames for p in f["candidates"][0]["content"]["parts"]) == "Echo: one two three"
    assert model_calls(world) == 1
