"""The reference upstream model server (tests/upstream): its failure knobs (failed requests, cut and
stalled streams, latency, keys, the control endpoint) and running it in-process or from the command
line, driven by the official SDKs. No database: plain pytest functions."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import anthropic
import httpx
import openai
import pytest

from tests.gateway.upstream.upstream_support import USER, an, chunks_of, oa, sse_lines
from tests.servers import ROOT, free_port
from tests.upstream import running_upstream
from tests.upstream.fixtures import upstream  # noqa: F401  (the fixture)

# ---- failure knobs -----------------------------------------------------------------------------

def test_fail_status_for_a_number_of_requests(upstream):
    upstream.configure(fail_status=429, fail_times=1)
    client = oa(upstream)
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="m", messages=USER)
    assert info.value.response.headers["retry-after"] == "1" and info.value.code == "rate_limit_exceeded"
    assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content
    upstream.configure(fail_status=500, fail_times=-1)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=USER)

    upstream.configure(fail_status=529, fail_times=2)
    for _ in range(2):
        with pytest.raises(anthropic.OverloadedError) as err:
            an(upstream).messages.create(model="c", max_tokens=5, messages=USER)
        assert err.value.body["error"]["type"] == "overloaded_error"
    assert an(upstream).messages.create(model="c", max_tokens=5, messages=USER).content[0].text
    upstream.configure(fail_status=429, fail_times=1)
    with pytest.raises(anthropic.RateLimitError):
        an(upstream).messages.create(model="c", max_tokens=5, messages=USER)


def test_fail_paths_limit_the_failure(upstream):
    upstream.configure(fail_status=503, fail_paths=["/v1/embeddings"])
    client = oa(upstream)
    with pytest.raises(openai.InternalServerError) as info:
        client.embeddings.create(model="e", input="x")
    assert info.value.status_code == 503
    assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content


def test_sdk_retries_a_single_failure(upstream):
    upstream.configure(fail_status=529, fail_times=1)
    client = anthropic.Anthropic(base_url=upstream.url, api_key="x", max_retries=1)
    started = time.monotonic()
    assert client.messages.create(model="c", max_tokens=5, messages=USER).content[0].text
    assert len(upstream.requests) == 2
    assert time.monotonic() - started >= 0.9  # it waited as "retry-after: 1" said
    assert upstream.requests[1].headers["x-stainless-retry-count"] == "1"


def test_cut_after_tokens_ends_streams_without_their_end(upstream):
    upstream.configure(cut_after_tokens=2)
    lines, error = sse_lines(upstream, "/v1/chat/completions", {"model": "m", "messages": USER, "stream": True})
    assert isinstance(error, httpx.RemoteProtocolError)
    chunks = chunks_of(lines)
    assert [c["choices"][0]["delta"].get("content") for c in chunks] == ["", "Echo: ", "hello "]
    assert "data: [DONE]" not in lines and all(c["choices"][0]["finish_reason"] is None for c in chunks)

    lines, error = sse_lines(upstream, "/v1/messages", {"model": "c", "max_tokens": 9, "messages": USER,
                                                        "stream": True})
    assert isinstance(error, httpx.RemoteProtocolError)
    assert sum(line == "event: content_block_delta" for line in lines) == 2
    assert "event: message_stop" not in lines and "event: message_delta" not in lines

    with pytest.raises(openai.APIConnectionError):  # a non-streamed request gets no response at all
        oa(upstream).chat.completions.create(model="m", messages=USER)


def test_stall_after_tokens_trips_a_read_timeout(upstream):
    upstream.configure(stall_after_tokens=1, stall_seconds=5)
    started = time.monotonic()
    lines, error = sse_lines(upstream, "/v1/chat/completions", {"model": "m", "messages": USER, "stream": True},
                             timeout=httpx.Timeout(5, read=0.3))
    assert isinstance(error, httpx.ReadTimeout) and time.monotonic() - started < 2
    assert [c["choices"][0]["delta"].get("content") for c in chunks_of(lines)] == ["", "Echo: "]

    upstream.configure(stall_seconds=0.2)  # a short stall, then the stream carries on
    lines, error = sse_lines(upstream, "/v1/chat/completions", {"model": "m", "messages": USER, "stream": True})
    assert error is None and lines[-1] == "data: [DONE]"


def test_latency_and_token_pace(upstream):
    client = oa(upstream)
    upstream.configure(latency_ms=200)
    started = time.monotonic()
    client.models.list()
    assert 0.2 <= time.monotonic() - started < 1.5
    upstream.configure(latency_ms=0, tokens_per_second=20)  # 4 tokens at 50 ms each
    started = time.monotonic()
    list(client.chat.completions.create(model="m", messages=USER, stream=True))
    assert 0.19 <= time.monotonic() - started < 1.5


def test_require_key(upstream):
    upstream.configure(require_key="sekrit")
    with pytest.raises(openai.AuthenticationError) as info:
        oa(upstream).chat.completions.create(model="m", messages=USER)
    assert info.value.code == "invalid_api_key"
    assert oa(upstream, api_key="sekrit").chat.completions.create(model="m", messages=USER).choices
    with pytest.raises(anthropic.AuthenticationError) as err:
        an(upstream).messages.create(model="c", max_tokens=5, messages=USER)
    assert err.value.body["error"]["type"] == "authentication_error"
    assert an(upstream, api_key="sekrit").messages.create(model="c", max_tokens=5, messages=USER).content
    assert httpx.get(upstream.url + "/api/tags", headers={"authorization": "Bearer sekrit"}).status_code == 200
    body = {"model": "c", "max_tokens": 5, "messages": USER}
    assert httpx.post(upstream.url + "/v1/messages", json=body, headers={"x-api-key": "sekrit"}).status_code == 200
    assert httpx.post(upstream.url + "/v1/messages", json=body, headers={"x-api-key": "nope"}).status_code == 401


def test_control_endpoint(upstream):
    resp = httpx.post(upstream.url + "/_control", json={"reply": "from control", "latency_ms": 1})
    assert resp.status_code == 200 and resp.json()["knobs"]["reply"] == "from control"
    assert upstream.knobs["reply"] == "from control"
    assert oa(upstream).chat.completions.create(model="m", messages=USER).choices[0].message.content == "from control"
    listed = httpx.get(upstream.url + "/_control/requests").json()
    assert [r["path"] for r in listed] == ["/v1/chat/completions"]  # control calls are not logged
    bad = httpx.post(upstream.url + "/_control", json={"no_such_knob": 1})
    assert bad.status_code == 400 and "no_such_knob" in bad.json()["error"]
    assert httpx.post(upstream.url + "/_control", json={"latency_ms": "slow"}).status_code == 400
    assert httpx.post(upstream.url + "/_control/reset").json()["knobs"]["reply"] is None
    assert upstream.requests == [] and upstream.knobs["latency_ms"] == 0
    with pytest.raises(TypeError):
        upstream.configure(replyy="typo")


def test_kind_limits_the_wire_formats(upstream):
    upstream.configure(kind="openai")
    with pytest.raises(anthropic.NotFoundError):
        an(upstream).messages.create(model="c", max_tokens=5, messages=USER)
    assert oa(upstream).chat.completions.create(model="m", messages=USER).choices


# ---- running it ---------------------------------------------------------------------------------

def test_running_upstream_starts_fast_and_stops():
    started = time.monotonic()
    with running_upstream(reply="private", models=["a"]) as private:
        assert time.monotonic() - started < 0.5
        assert private.url.startswith("http://127.0.0.1:") and not private.url.endswith("/")
        assert oa(private).chat.completions.create(model="m", messages=USER).choices[0].message.content == "private"
        private.reset()
        assert private.requests == [] and private.knobs["models"] == ["echo-1"]
        url = private.url
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/v1/models", timeout=1)


def test_command_line_server():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.upstream", "--port", str(port), "--reply", "cli",
                             "--models", "x,y", "--require-key", "k"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 15
        while True:
            try:
                httpx.get(base + "/_control", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()
                time.sleep(0.05)
        client = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
        assert [m.id for m in client.models.list()] == ["x", "y"]
        assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content == "cli"
        httpx.post(base + "/_control", json={"reply": "changed"})
        assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content == "changed"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
