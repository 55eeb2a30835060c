"""The model calls' client (gateway/upstream/http_client.py) through an HTTP proxy named
by the environment (gateway/upstream/egress.py): which variables and NO_PROXY entries it reads, and calls
through a real tinyproxy on loopback, on asyncio's loop and on uvloop: absolute-form targets to a plain-http
server, a CONNECT tunnel with TLS inside (the model server's certificate and name checked) to an https one,
the proxy's credentials, connections pooled per (proxy, origin), and a proxy that is dead or refuses as a
connect failure that never shows its credentials."""

import base64
import logging

import pytest

from gateway.upstream import egress
from gateway.upstream import http_client as uh
from gateway.upstream.providers.base import failure_from_transport
from tests.gateway.upstream import upstream_http_support
from tests.gateway.upstream.egress_support import (  # noqa: F401 — fixtures among them
    PROXY_PASSWORD,
    certificate,
    guarded,
    proxy,
    proxy_env,
    tinyproxy,
    tls_upstream,
)
from tests.gateway.upstream.upstream_http_support import FAST, run
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

_each_loop = upstream_http_support.each_loop  # the autouse fixture: every test on asyncio and on uvloop

PASSWORD = PROXY_PASSWORD  # what the `guarded` proxy asks for


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    cert, key = certificate(directory)
    with tls_upstream(cert, key) as server:
        yield server, cert


def routed(env: dict, url: str):
    scheme, host, port = uh.build_request("GET", url).origin
    environment = egress.read_environment(env)
    proxy = environment.proxies.get(scheme)
    return None if proxy is None or egress.bypassed(environment, host, port) else proxy.shown


def test_which_variables_name_the_proxy():
    assert routed({}, "http://api.example.com/v1") is None
    assert routed({"HTTP_PROXY": "http://p:3128"}, "http://api.example.com/v1") == "p:3128"
    assert routed({"HTTP_PROXY": "http://p:3128"}, "https://api.example.com/v1") is None
    assert routed({"HTTPS_PROXY": "p2:8080"}, "https://api.example.com/v1") == "p2:8080"  # no scheme: http://
    assert routed({"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2"}, "https://a.test/") == "low:1"
    assert routed({"ALL_PROXY": "http://all:3"}, "http://a.test/") == "all:3"
    assert routed({"ALL_PROXY": "http://all:3", "https_proxy": "http://s:4"}, "https://a.test/") == "s:4"
    assert routed({"HTTP_PROXY": "  "}, "http://a.test/") is None  # empty is unset
    assert routed({"HTTP_PROXY": "http://p"}, "http://a.test/") == "p:80"


def test_no_proxy_entries():
    env = {"HTTPS_PROXY": "http://p:3128", "no_proxy": "internal.example.com, .corp.test,*.lab.test,"
           "10.0.0.0/8,192.168.1.7,::1,[fd00::1]:8443,gpu.test:8000"}
    for url in ("https://internal.example.com/v1", "https://a.internal.example.com/v1", "https://corp.test/",
                "https://x.corp.test/", "https://y.lab.test/", "https://10.2.3.4/", "https://192.168.1.7:8080/",
                "https://[::1]:9000/", "https://[fd00::1]:8443/", "https://gpu.test:8000/", "https://GPU.test:8000/"):
        assert routed(env, url) is None, url
    for url in ("https://api.example.com/v1", "https://notinternal.example.com/", "https://corp.test.evil/",
                "https://11.0.0.1/", "https://192.168.1.8/", "https://[fd00::1]:9443/", "https://gpu.test:8001/",
                "https://gpu.test/"):
        assert routed(env, url) == "p:3128", url
    assert routed({"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "*"}, "https://api.example.com/") is None
    assert routed({"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "a.test", "no_proxy": "b.test"}, "https://b.test/") \
        is None  # the lower-case form first, as for the proxies


def test_credentials_become_a_basic_header_and_are_never_shown(caplog):
    proxy = egress.parse_proxy("HTTPS_PROXY", f"http://us%40er:{PASSWORD}@proxy.corp:3128")
    assert proxy.authorization == "Basic " + base64.b64encode(f"us@er:{PASSWORD}".encode()).decode()
    assert proxy.shown == "proxy.corp:3128" and PASSWORD not in repr(proxy.shown)
    unusable = egress.parse_proxy("HTTPS_PROXY", f"socks5://u:{PASSWORD}@proxy.corp:1080")
    assert unusable.problem == "HTTPS_PROXY names a socks5:// proxy; only http:// proxies are supported"
    assert egress.parse_proxy("HTTP_PROXY", f"http://u:{PASSWORD}@proxy:notaport").problem == \
        "HTTP_PROXY is not a proxy URL"


def test_the_environment_is_read_once_and_without_a_proxy_the_client_does_not_ask(proxy_env, monkeypatch):  # noqa: F811
    origin = ("https", "api.example.com", 443)
    assert not egress.OFF  # not read yet
    assert egress.route(origin) is None and egress.route(None) is None
    assert egress.OFF  # read: no proxy; the client skips route() from now on
    monkeypatch.setenv("HTTPS_PROXY", "http://p:3128")
    assert egress.route(origin) is None  # read once per process: a change is seen after reset()
    egress.reset()
    assert egress.route(origin).proxy.shown == "p:3128" and egress.route(origin).tunnel and not egress.OFF


def test_plain_http_goes_through_the_proxy_in_absolute_form(proxy_env, proxy, upstream):  # noqa: F811
    proxy_env(HTTP_PROXY=proxy.url)
    port = upstream.url.rsplit(":", 1)[1]

    async def main():
        client = uh.Client()
        for _ in range(2):
            response = await client.send(uh.build_request(
                "POST", f"{upstream.url}/v1/chat/completions", timeouts=FAST,
                json={"model": "echo-1", "messages": [{"role": "user", "content": "hi"}]}))
            assert response.status_code == 200, await response.aread()
            assert (await response.aread()).startswith(b"{")
        assert not any(client._idle.values())  # tinyproxy closes after each answer, without saying so
        await client.aclose()

    run(main())
    proxy.wait_for(f"POST http://127.0.0.1:{port}/v1/chat/completions HTTP/1.1")
    assert upstream.last.headers.get("host") == f"127.0.0.1:{port}"
    assert "proxy-authorization" not in upstream.last.headers


def test_https_goes_through_a_connect_tunnel_with_tls_to_the_model_server(proxy_env, proxy, tls):  # noqa: F811
    server, cert = tls
    proxy_env(HTTPS_PROXY=proxy.url, SSL_CERT_FILE=str(cert))
    port = server.url.rsplit(":", 1)[1]

    connects = proxy.requests().count(f"CONNECT 127.0.0.1:{port} HTTP/1.1")

    async def main():
        client = uh.Client()
        for stream in (True, False):
            response = await client.send(uh.build_request(
                "POST", f"{server.url}/v1/chat/completions", timeouts=FAST,
                json={"model": "echo-1", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}))
            body = await response.aread()
            assert response.status_code == 200, body
            assert (b"data: " in body) is stream
        origin = ("https", "127.0.0.1", int(port))
        assert [(key, len(idle)) for key, idle in client._idle.items()] == [((origin, egress.route(origin).proxy), 1)]
        await client.aclose()

    run(main())
    proxy.wait_for(f"CONNECT 127.0.0.1:{port} HTTP/1.1")
    assert proxy.requests().count(f"CONNECT 127.0.0.1:{port} HTTP/1.1") == connects + 1  # one tunnel, kept alive
    assert server.state.requests[-1].json["model"] == "echo-1"


def test_inside_the_tunnel_the_model_server_s_name_is_checked(proxy_env, proxy, tmp_path):  # noqa: F811
    cert, key = certificate(tmp_path, addresses=("127.0.0.2",), names=("model.test",))  # not 127.0.0.1
    proxy_env(HTTPS_PROXY=proxy.url, SSL_CERT_FILE=str(cert))
    with tls_upstream(cert, key) as server:
        async def main():
            with pytest.raises(uh.ConnectError, match="certificate verify failed: IP address mismatch"):
                await uh.Client().send(uh.build_request("POST", f"{server.url}/v1/chat/completions", json={},
                                                        timeouts=FAST))

        run(main())


def test_the_proxy_s_credentials_go_to_the_proxy_only(proxy_env, guarded, upstream, tls, caplog):  # noqa: F811
    server, cert = tls
    proxy_env(HTTP_PROXY=guarded.url, HTTPS_PROXY=guarded.url, SSL_CERT_FILE=str(cert))
    caplog.set_level(logging.DEBUG)

    async def main():
        client = uh.Client()
        for url in (f"{upstream.url}/v1/chat/completions", f"{server.url}/v1/chat/completions"):
            response = await client.send(uh.build_request("POST", url, timeouts=FAST, json={
                "model": "echo-1", "messages": [{"role": "user", "content": "hi"}]}))
            assert response.status_code == 200, await response.aread()
            await response.aread()
        await client.aclose()

    run(main())
    guarded.wait_for(f"CONNECT 127.0.0.1:{server.url.rsplit(':', 1)[1]} HTTP/1.1")
    for request in (upstream.last, server.state.requests[-1]):
        assert "proxy-authorization" not in request.headers
    assert PASSWORD not in caplog.text and PASSWORD not in guarded.log()


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_missing_or_wrong_credentials_are_a_connect_failure(proxy_env, guarded, upstream, tls, scheme):  # noqa: F811
    server, cert = tls
    url = f"{upstream.url if scheme == 'http' else server.url}/v1/chat/completions"
    tries = [(f"http://127.0.0.1:{guarded.port}", "asked for credentials (407): the proxy URL holds none")]
    if scheme == "https":  # for plain http, tinyproxy answers wrong credentials with a 401 of its own, not a 407
        tries.append((f"http://gw:wrong-{PASSWORD}@127.0.0.1:{guarded.port}", "refused the tunnel: "
                      "'HTTP/1.0 401 Unauthorized'"))
    for proxy_url, words in tries:
        proxy_env(HTTP_PROXY=proxy_url, HTTPS_PROXY=proxy_url, SSL_CERT_FILE=str(cert))

        async def main():
            with pytest.raises(uh.ConnectError) as raised:
                await uh.Client().send(uh.build_request("POST", url, json={}, timeouts=FAST))
            return raised.value

        error = run(main())
        assert str(error) == f"The proxy 127.0.0.1:{guarded.port} {words}."
        failure = failure_from_transport(error)
        assert (failure.status, failure.cooldown_cause) == (503, f"connect failed ({error})")
        assert PASSWORD not in failure.cooldown_cause


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_dead_proxy_is_a_connect_failure_without_its_credentials(proxy_env, closed_port, scheme):
    proxy_env(**{f"{scheme.upper()}_PROXY": f"http://gw:{PASSWORD}@127.0.0.1:{closed_port}"})

    async def main():
        with pytest.raises(uh.ConnectError) as raised:
            await uh.Client().send(uh.build_request("POST", f"{scheme}://model.test/v1", json={}, timeouts=FAST))
        return raised.value

    error = run(main())
    assert str(error) == f"The proxy 127.0.0.1:{closed_port} could not be reached (Connection refused)."
    assert failure_from_transport(error).cooldown_cause == f"connect failed ({error})"


def test_an_unusable_proxy_variable_fails_every_call_it_covers(proxy_env, caplog):  # noqa: F811
    proxy_env(HTTPS_PROXY=f"socks5://gw:{PASSWORD}@127.0.0.1:1080")
    caplog.set_level(logging.INFO)

    async def main():
        with pytest.raises(uh.ConnectError, match="only http:// proxies are supported"):
            await uh.Client().send(uh.build_request("POST", "https://model.test/v1", json={}, timeouts=FAST))

    run(main())
    assert "Model calls to https servers will fail: HTTPS_PROXY names a socks5:// proxy" in caplog.text
    assert PASSWORD not in caplog.text


def test_no_proxy_connects_directly(proxy_env, closed_port, upstream):  # noqa: F811
    proxy_env(HTTP_PROXY=f"http://127.0.0.1:{closed_port}", NO_PROXY="example.com,127.0.0.0/8")

    async def main():
        response = await uh.Client().send(uh.build_request(
            "POST", f"{upstream.url}/v1/chat/completions", timeouts=FAST,
            json={"model": "echo-1", "messages": [{"role": "user", "content": "hi"}]}))
        assert response.status_code == 200
        await response.aread()

    run(main())
