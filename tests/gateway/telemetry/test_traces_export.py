"""Traces exported by a real gateway process (uvicorn on loopback, the test database) to an OTLP/HTTP
receiver this test starts: the span tree of a chat completion that falls through once, a streamed
call's token counts, a client's `traceparent` continued, the model server receiving `traceparent`."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelFallbackFactory,
    ModelServerFactory,
    api_key_for,
    bearer,
)
from tests.gateway.telemetry.otlp_receiver import otel_env, otlp_receiver
from tests.servers import wait_for_quiet_database, web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


@pytest.fixture(scope="module")
def receiver():
    with otlp_receiver() as r:
        yield r


@pytest.fixture(scope="module")
def traced_gateway(django_db_setup, django_db_blocker, receiver):
    with django_db_blocker.unblock():
        with web_process(REGISTRY_TTL_SECONDS="0", **otel_env(receiver)) as base:
            yield base


@pytest.fixture
def world(transactional_db, traced_gateway, upstream, receiver):  # noqa: F811
    """`oa/first` falls back to `ob/second`, both on the reference upstream."""
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True))
    first = ModelFactory(server=ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1"),
                         name="first", is_default=True)
    second = ModelFactory(server=ModelServerFactory(name="ob", kind="openai", base_url=f"{upstream.url}/v1"),
                          name="second")
    ModelFallbackFactory(model=first, fallback=second)
    receiver.clear()
    http = httpx.Client(base_url=traced_gateway, headers=bearer(api_key_for(account)), timeout=10)
    yield http
    http.close()
    wait_for_quiet_database()


def _request_trace(receiver, response: httpx.Response, spans_expected: int):
    """The spans of the trace whose server span holds the response's request id."""
    request_id = response.headers["X-Request-Id"]

    def server_of(spans):
        return next((s for s in spans if s.kind == "SERVER" and s.attributes.get("gateway.request_id") == request_id),
                    None)

    spans = receiver.wait_for(lambda spans: (server := server_of(spans)) is not None and len(
        [s for s in spans if s.trace_id == server.trace_id]) >= spans_expected, what=f"the trace of {request_id}")
    server = server_of(spans)
    return server, [s for s in spans if s.trace_id == server.trace_id and s is not server]


def test_a_chat_completion_that_falls_through_once_is_one_server_span_and_two_attempt_spans(world, receiver,
                                                                                            upstream):  # noqa: F811
    upstream.configure(fail_status=503, fail_times=1)
    r = world.post("/v1/chat/completions", json={"model": "oa/first", "max_tokens": 50,
                                                 "messages": [{"role": "user", "content": "hello there"}]})
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    server, children = _request_trace(receiver, r, 3)
    assert server.name == "POST /v1/chat/completions" and server.parent_id == ""
    assert server.attributes["http.route"] == "/v1/chat/completions"
    assert server.attributes["http.request.method"] == "POST"
    assert server.attributes["http.response.status_code"] == 200
    assert server.status == "UNSET"
    assert server.resource["service.name"] == "gateway-under-test"
    failed, answered = sorted(children, key=lambda s: s.start)
    assert {failed.parent_id, answered.parent_id} == {server.span_id}
    assert failed.kind == answered.kind == "CLIENT"
    assert failed.name == "chat first" and answered.name == "chat second"
    assert failed.status == "ERROR" and failed.attributes["error.type"] == "unavailable"
    assert failed.attributes["http.response.status_code"] == 503
    assert failed.event("gateway.fall_through") == {"gateway.next_model": "ob/second"}
    assert answered.status == "UNSET"
    port = int(upstream.url.rsplit(":", 1)[1])
    assert answered.attributes == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "second",
        "gen_ai.request.max_tokens": 50, "server.address": "127.0.0.1", "server.port": port,
        "gateway.model": "ob/second", "gateway.server": "ob",
        "gen_ai.response.time_to_first_chunk": answered.attributes["gen_ai.response.time_to_first_chunk"],
        "gen_ai.response.model": "second", "gen_ai.response.id": answered.attributes["gen_ai.response.id"],
        "gen_ai.usage.input_tokens": usage["prompt_tokens"], "gen_ai.usage.output_tokens": usage["completion_tokens"],
        "gen_ai.response.finish_reasons": ["stop"]}
    assert 0 < answered.attributes["gen_ai.response.time_to_first_chunk"] < 10
    assert server.start <= failed.start < failed.end <= answered.start < answered.end <= server.end
    assert "hello there" not in json.dumps([s.attributes for s in (server, failed, answered)])  # no text kept


def test_a_streamed_call_carries_its_token_counts(world, receiver):
    with world.stream("POST", "/v1/chat/completions", json={
            "model": "oa/first", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "count these five words"}]}) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: {")]
    usage = json.loads(lines[-1][6:])["usage"]
    _server, (answered,) = _request_trace(receiver, r, 2)
    assert answered.attributes["gen_ai.usage.input_tokens"] == usage["prompt_tokens"] > 0
    assert answered.attributes["gen_ai.usage.output_tokens"] == usage["completion_tokens"] > 0
    assert answered.attributes["gen_ai.response.finish_reasons"] == ["stop"]


def test_a_clients_traceparent_is_continued_and_the_model_server_receives_its_own(world, receiver,
                                                                                  upstream):  # noqa: F811
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    r = world.post("/v1/chat/completions", headers={"traceparent": f"00-{trace_id}-{parent}-01"},
                   json={"model": "oa/first", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    server, (answered,) = _request_trace(receiver, r, 2)
    assert server.trace_id == trace_id and server.parent_id == parent
    (sent,) = upstream.requests
    assert sent.headers["traceparent"] == f"00-{trace_id}-{answered.span_id}-01"


def test_a_request_without_traceparent_starts_a_trace_the_model_server_continues(world, receiver, upstream):  # noqa: F811
    r = world.post("/v1/chat/completions", json={"model": "oa/first", "messages": [{"role": "user", "content": "hi"}]})
    server, (answered,) = _request_trace(receiver, r, 2)
    assert server.parent_id == "" and answered.parent_id == server.span_id
    (sent,) = upstream.requests
    version, trace_id, parent, flags = sent.headers["traceparent"].split("-")
    assert (version, trace_id, parent) == ("00", server.trace_id, answered.span_id)
    assert int(flags, 16) & 1  # sampled (the SDK may also set W3C's random-trace-id flag, 0x02)


def test_a_webhook_path_is_traced_without_its_token_and_a_refusal_is_no_server_error(world, receiver):
    r = httpx.post(f"{str(world.base_url).rstrip('/')}/api/v1/hooks/some-secret-token-value", content=b"{}")
    assert r.status_code == 404
    server, _ = _request_trace(receiver, r, 1)
    assert "some-secret-token-value" not in server.attributes["url.path"]
    assert server.attributes["http.response.status_code"] == 404 and server.status == "UNSET"
