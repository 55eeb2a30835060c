"""Egress through a proxy, through the gateway (the project's ASGI application in this process): chat completions,
streamed and not, to a plain-http and to an https model server through a real tinyproxy on loopback (its log
proves the calls went through it), the proxy's credentials, NO_PROXY, a dead proxy as a model-server failure
(the model falls through; without a fallback a 503 in each surface's shape), and the console's connectivity
check and embeddings on the same way (they use the same client)."""

from __future__ import annotations

import json
import logging

import pytest

from gateway.console import server_check
from gateway.registry import cooldown
from tests.asgi import call
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelFallbackFactory,
    ModelServerFactory,
    api_key_for,
)
from tests.gateway.upstream.egress_support import (  # noqa: F401 — fixtures among them
    PROXY_PASSWORD,
    certificate,
    guarded,
    proxy,
    proxy_env,
    tinyproxy,
    tls_upstream,
)
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

PASSWORD = PROXY_PASSWORD  # what the `guarded` proxy asks for
HELLO = [{"role": "user", "content": "hello proxy"}]


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    cert, key = certificate(tmp_path_factory.mktemp("tls"))
    with tls_upstream(cert, key) as server:
        yield server, cert


@pytest.fixture
def world(transactional_db, upstream, settings, proxy_env):  # noqa: F811
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000}
    account = AccountFactory(group=AccountGroupFactory(api_access=True))
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=5.0)
    ModelFactory(server=server, name="echo-1", is_default=True)
    yield type("World", (), {"key": api_key_for(account), "server": server, "upstream": upstream})


def post(key: str, path: str, body: dict) -> tuple[int, bytes]:
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    status, _, content = call("POST", path, headers=headers, body=json.dumps(body).encode())
    return status, content


def chat(key: str, model: str = "oa/echo-1", stream: bool = False) -> tuple[int, bytes]:
    return post(key, "/v1/chat/completions", {"model": model, "messages": HELLO, "stream": stream})


def assert_answered(status: int, body: bytes, stream: bool) -> None:
    assert status == 200, body
    if stream:
        events = [line[6:] for line in body.decode().splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        text = "".join((json.loads(e)["choices"] or [{}])[0].get("delta", {}).get("content") or ""
                       for e in events[:-1])
    else:
        text = json.loads(body)["choices"][0]["message"]["content"]
    assert "hello proxy" in text


def port_of(url: str) -> str:
    return url.rsplit(":", 1)[1]


def test_chat_completions_reach_a_plain_http_server_through_the_proxy(world, proxy, proxy_env):  # noqa: F811
    proxy_env(HTTP_PROXY=proxy.url)
    for stream in (False, True):
        assert_answered(*chat(world.key, stream=stream), stream)
    line = f"POST http://127.0.0.1:{port_of(world.upstream.url)}/v1/chat/completions HTTP/1.1"
    proxy.wait_for(line)
    assert proxy.requests().count(line) >= 2
    assert [r.json["stream"] for r in world.upstream.requests] == [True, True]  # whole replies are asked streamed


def test_chat_completions_reach_an_https_server_through_a_tunnel(world, proxy, proxy_env, tls):  # noqa: F811
    server, cert = tls
    proxy_env(HTTPS_PROXY=proxy.url, SSL_CERT_FILE=str(cert))
    world.server.base_url = f"{server.url}/v1"
    world.server.save()
    before = len(server.state.requests)
    for stream in (False, True):
        assert_answered(*chat(world.key, stream=stream), stream)
    proxy.wait_for(f"CONNECT 127.0.0.1:{port_of(server.url)} HTTP/1.1")
    assert len(server.state.requests) == before + 2 and not world.upstream.requests


def test_the_proxy_s_credentials(world, guarded, proxy_env, tls, caplog):  # noqa: F811
    server, cert = tls
    caplog.set_level(logging.DEBUG)
    proxy_env(HTTP_PROXY=guarded.url, HTTPS_PROXY=guarded.url, SSL_CERT_FILE=str(cert))
    assert_answered(*chat(world.key), False)
    https = ModelServerFactory(name="tls", kind="openai", base_url=f"{server.url}/v1", read_timeout=5.0)
    ModelFactory(server=https, name="echo-1")
    assert_answered(*chat(world.key, "tls/echo-1", stream=True), True)
    guarded.wait_for(f"POST http://127.0.0.1:{port_of(world.upstream.url)}/v1/chat/completions HTTP/1.1")
    guarded.wait_for(f"CONNECT 127.0.0.1:{port_of(server.url)} HTTP/1.1")
    assert "proxy-authorization" not in world.upstream.last.headers
    assert "proxy-authorization" not in server.state.requests[-1].headers

    proxy_env(HTTP_PROXY=f"http://127.0.0.1:{guarded.port}")  # none: the proxy answers 407
    status, body = chat(world.key)
    assert status == 503, body
    assert PASSWORD not in caplog.text and PASSWORD not in body.decode()
    assert f"connect failed (The proxy 127.0.0.1:{guarded.port} asked for credentials (407)" in caplog.text


def test_no_proxy_connects_directly(world, closed_port, proxy_env):  # noqa: F811
    proxy_env(HTTP_PROXY=f"http://127.0.0.1:{closed_port}", NO_PROXY="models.internal,127.0.0.1")
    assert_answered(*chat(world.key, stream=True), True)


def test_a_dead_proxy_is_a_model_server_failure(world, closed_port, proxy_env, caplog):  # noqa: F811
    """The model falls through to one on a server NO_PROXY leaves out; without a fallback, a 503 in each
    surface's shape. The server cools down; the proxy's credentials appear nowhere."""
    proxy_env(HTTP_PROXY=f"http://gw:{PASSWORD}@127.0.0.1:{closed_port}", NO_PROXY="localhost")
    near = ModelServerFactory(name="near", kind="openai", base_url=f"http://localhost:{port_of(world.upstream.url)}/v1")
    ModelFallbackFactory(model=world.server.models.get(), fallback=ModelFactory(server=near, name="echo-2"))
    status, body = chat(world.key)
    assert status == 200 and json.loads(body)["model"] == "near/echo-2", body
    assert (f"model server oa cooling down for 30 s after: connect failed (The proxy 127.0.0.1:{closed_port} "
            "could not be reached (Connection refused).)") in caplog.text

    cooldown.forget_all()
    ModelFactory(server=world.server, name="alone")
    status, body = chat(world.key, "oa/alone")
    assert status == 503, body
    assert json.loads(body)["error"] | {"message": ""} == {
        "message": "", "type": "server_error", "param": None, "code": "service_unavailable"}
    status, body = post(world.key, "/v1/messages", {"model": "oa/alone", "max_tokens": 20, "messages": HELLO})
    assert status == 503, body
    assert json.loads(body) | {"error": {}, "request_id": ""} == {"type": "error", "error": {}, "request_id": ""}
    assert json.loads(body)["error"]["type"] == "api_error"
    assert PASSWORD not in caplog.text and PASSWORD not in body.decode()


def test_the_console_check_and_embeddings_go_through_the_proxy(world, proxy, proxy_env):  # noqa: F811
    proxy_env(HTTP_PROXY=proxy.url)
    port = port_of(world.upstream.url)
    outcome = server_check.connection_test(row=world.server)
    assert outcome.ok, outcome.message
    proxy.wait_for(f"POST http://127.0.0.1:{port}/v1/chat/completions HTTP/1.1")

    ModelFactory(server=world.server, name="embed-1", supports_chat=False, supports_embeddings=True)
    status, body = post(world.key, "/v1/embeddings", {"model": "oa/embed-1", "input": "through the proxy"})
    assert status == 200 and len(json.loads(body)["data"][0]["embedding"]) == 64, body
    proxy.wait_for(f"POST http://127.0.0.1:{port}/v1/embeddings HTTP/1.1")


def test_the_console_check_says_when_the_proxy_is_dead(world, closed_port, proxy_env):  # noqa: F811
    proxy_env(HTTP_PROXY=f"http://gw:{PASSWORD}@127.0.0.1:{closed_port}")
    outcome = server_check.connection_test(row=world.server)
    assert not outcome.ok and PASSWORD not in outcome.message
    assert outcome.message == ("Chat call to oa/echo-1 failed: 503 The model server could not be reached. "
                               f"(connect failed (The proxy 127.0.0.1:{closed_port} could not be reached "
                               "(Connection refused).))")
