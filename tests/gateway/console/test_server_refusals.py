"""A model server that refuses calls (404 for a base URL without /v1) shows it as
its last failure in the server list, and the usage console names the refusals as /metrics does
(outcome="refused"), not "chain failed"."""

import asyncio
import html
import json
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.calls.embeddings import embed
from gateway.models import CallFailureDaily
from gateway.registry import server_health
from gateway.registry.snapshot import registry
from gateway.usage import call_failures
from gateway.web.errors import ApiError
from tests.asgi import call
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

LIST = "/admin/gateway/modelserver/"
CONSOLE = "/admin/gateway/usagerecord/console/"
REFUSAL = "404 Unknown request URL: POST /chat/completions."


@pytest.fixture
def no_v1(transactional_db, redis_url, upstream):  # noqa: F811
    """An OpenAI-kind server saved without /v1 (the reference upstream's root), and a key that may use it."""
    server = ModelServerFactory(name="noroot", kind="openai", base_url=upstream.url)
    ModelFactory(server=server, name="echo-1", supports_embeddings=True)
    key = api_key_for(AccountFactory(group=AccountGroupFactory(api_access=True)))
    return server, key


def metric(name: str, **labels) -> float:
    status, _headers, body = call("GET", "/metrics")
    assert status == 200
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def last_failure_in_list(client) -> str:
    page = client.get(LIST).content.decode()
    row = next(r for r in re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S) if ">noroot<" in r)
    cell = re.search(r'<td class="field-last_failure[^"]*"[^>]*>(.*?)</td>', row, re.S).group(1)
    return html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()


def test_a_refused_chat_call_is_the_server_s_last_failure_and_counted_as_refused(no_v1, admin_client):
    _server, key = no_v1
    labels = {"server": "noroot", "model": "noroot/echo-1", "outcome": "refused"}
    before = metric("gateway_upstream_calls_total", **labels)

    status, _headers, body = call("POST", "/v1/chat/completions", body=json.dumps(
        {"model": "noroot/echo-1", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers=[(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")])

    assert status == 404
    assert json.loads(body)["error"]["code"] == "upstream_refused"
    server_health.flush()
    server_health.forget_all()  # what the list shows comes from the shared record, as in another process
    shown = last_failure_in_list(admin_client)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: " + re.escape(REFUSAL), shown)
    assert metric("gateway_upstream_calls_total", **labels) == before + 1
    assert call_failures.flush()
    assert list(CallFailureDaily.objects.values_list("model", "kind", "count")) == [("noroot/echo-1", "refused", 1)]
    console = admin_client.get(CONSOLE).content.decode()
    assert re.search(r'id="total-refused">1<', console) and re.search(r'id="total-chain-failed">0<', console)
    assert '<td class="num">0</td><td class="num">0</td><td class="num">1</td></tr>' in console  # its row


def test_a_refusal_answered_at_once_is_recorded_too(no_v1, admin_client):
    """The native surfaces answer a refusal with the server's own status (spec 7.3): here an
    embeddings call, through the provider's plain request."""
    target = registry().by_public_id["noroot/echo-1"]
    with pytest.raises(ApiError) as refused:
        asyncio.run(embed([target], ["hello"]))
    assert (refused.value.status, refused.value.code) == (404, "upstream_refused")
    assert last_failure_in_list(admin_client).endswith(": 404 Unknown request URL: POST /embeddings.")


def test_a_refusal_does_not_make_a_pool_turn_away_from_the_server(no_v1):
    """A request a server takes as invalid says nothing of its other calls: the admin shows it, the
    pools' `failing` mark does not follow it (a failure does)."""
    server, _key = no_v1
    target = registry().by_public_id["noroot/echo-1"]
    server_health.refused(target.server, "400 bad request")
    assert not server_health.failing(server.pk)
    assert server_health.health_of([server.pk])[server.pk].failure_cause == "400 bad request"
    server_health.failed(target.server, "500 oops")
    assert server_health.failing(server.pk)


@pytest.fixture
def admin_client(client):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))
    return client
