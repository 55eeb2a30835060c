"""The model server admin shows each server's health (last success, last failure
and its cause, cooldown), recorded off the call's path (gateway/registry/server_health.py), and saving a
server runs model discovery for it without ever failing the save."""

import asyncio
import re
import time
from datetime import datetime, timezone

import pytest
from django.contrib import messages
from django.test import AsyncClient

from gateway.models import Model, ModelServer
from gateway.registry import server_health
from gateway.registry.default_model import chosen_text
from tests import console_html
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.servers import wait_for_quiet_database, web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

SHOWN = "%Y-%m-%d %H:%M:%S %Z"
LIST = "/admin/gateway/modelserver/"


@pytest.fixture(autouse=True)
def _cooldown_seconds(settings):
    settings.SERVER_COOLDOWN_SECONDS = 30


@pytest.fixture
def operator(db):
    return AccountFactory(is_staff=True, is_superuser=True, role="admin")


@pytest.fixture
def servers(transactional_db, redis_url, upstream, closed_port):  # noqa: F811
    """`oa` on the reference upstream, `gone` on a port nothing listens on; a key that may use both
    (committed: the calls read them from threads of their own, and from a web process)."""
    oa = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    ModelFactory(server=oa, name="echo-1")
    gone = ModelServerFactory(name="gone", base_url=f"http://127.0.0.1:{closed_port}/v1")
    ModelFactory(server=gone, name="m")
    key = api_key_for(AccountFactory(group=AccountGroupFactory(api_access=True, daily_tokens=1_000_000)))
    return oa, gone, key


def call(key: str, model: str, base: str | None = None) -> int:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": f"Bearer {key}"}
    if base is not None:
        import httpx

        return httpx.post(f"{base}/v1/chat/completions", json=body, headers=headers, timeout=30).status_code

    async def run():
        return (await AsyncClient().post("/v1/chat/completions", body, content_type="application/json",
                                         headers=headers)).status_code

    return asyncio.run(run())


def list_rows(response) -> dict[str, dict[str, str]]:
    """The change list's rows: server name → {field: text shown}."""
    return {row["name"]: row for row in console_html.list_rows(response.content.decode()) if "name" in row}


HEALTH_LABELS = {"Last success": "last_success", "Last failure": "last_failure", "Cooldown": "cooldown"}


def change_fields(response) -> dict[str, str]:
    """The read-only health fields of a change page: field → text shown."""
    shown = console_html.readonly(response.content.decode())
    return {field: shown[label] for label, field in HEALTH_LABELS.items() if label in shown}


def moment(text: str) -> datetime:
    return datetime.strptime(text[:23].replace("UTC", "+0000"), "%Y-%m-%d %H:%M:%S %z")


def test_the_list_and_the_change_page_show_last_success_last_failure_and_cooldown(client, operator, servers,
                                                                                  upstream):  # noqa: F811
    oa, gone, key = servers
    before = datetime.now(timezone.utc).replace(microsecond=0)
    upstream.configure(fail_status=500, fail_times=1)
    assert call(key, "oa/echo-1") == 503  # the one model of the chain failed
    assert call(key, "oa/echo-1") == 200
    assert call(key, "gone/m") == 503  # connect refused: cooling down
    assert call(key, "gone/m") == 503  # skipped while it cools down: no new failure
    server_health.flush()
    server_health.forget_all()  # what the admin shows comes from the shared record, as in another process
    client.force_login(operator)

    rows = list_rows(client.get(LIST))

    assert moment(rows["oa"]["last_success"]) >= before
    assert moment(rows["oa"]["last_failure"]) >= before
    assert moment(rows["oa"]["last_failure"]) <= moment(rows["oa"]["last_success"])
    assert rows["oa"]["last_failure"].endswith(" UTC: 500 Internal Server Error (injected by the test upstream)")
    assert rows["oa"]["cooldown"] == "no"
    assert rows["gone"]["last_success"] == "never seen"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: connect failed \(.+\)", rows["gone"]["last_failure"])
    assert re.fullmatch(r"until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", rows["gone"]["cooldown"])
    assert (moment(rows["gone"]["cooldown"][len("until "):]) - moment(rows["gone"]["last_failure"])).total_seconds() \
        == pytest.approx(30, abs=2)

    page = change_fields(client.get(f"{LIST}{gone.pk}/change/"))
    assert page == {"last_success": "never seen", "last_failure": rows["gone"]["last_failure"],
                    "cooldown": rows["gone"]["cooldown"]}
    assert change_fields(client.get(f"{LIST}add/")) == {}  # nothing to show yet


def test_a_process_s_news_reaches_the_admin_without_a_write_per_call(client, operator, servers,
                                                                      upstream):  # noqa: F811
    """Calls in a web process: their health is written by its flush thread, not by the calls."""
    oa, _gone, key = servers
    client.force_login(operator)
    with web_process(SERVER_HEALTH_FLUSH_SECONDS="0.2", REGISTRY_TTL_SECONDS="0") as base:
        upstream.configure(fail_status=503, fail_times=1)
        assert call(key, "oa/echo-1", base) == 503
        assert call(key, "oa/echo-1", base) == 200
        deadline = time.monotonic() + 10
        while (row := list_rows(client.get(LIST))["oa"])["last_success"] == "never seen" \
                or row["last_failure"] == "none seen":
            assert time.monotonic() < deadline, row
            time.sleep(0.1)
    wait_for_quiet_database()

    assert ": 503 " in row["last_failure"] and row["cooldown"] == "no"
    assert moment(row["last_failure"]) <= moment(row["last_success"])


def test_while_the_shared_state_cannot_be_read_the_list_still_answers(client, operator, servers, monkeypatch):
    oa, _gone, key = servers
    assert call(key, "oa/echo-1") == 200
    client.force_login(operator)
    monkeypatch.setattr(server_health.cache, "get_many", _raise_redis_down)

    rows = list_rows(client.get(LIST))

    assert rows["oa"]["last_success"] != "never seen"  # this process's own record
    assert rows["oa"]["cooldown"] == "unknown: the shared state cannot be read"


def _raise_redis_down(*args, **kwargs):
    import redis

    raise redis.ConnectionError("Connection refused")


def server_form(**fields) -> dict:
    return {"name": "oa", "kind": "openai", "enabled": "on", "connect_timeout": "2", "read_timeout": "30",
            "structured_output": "tool",
            "models-TOTAL_FORMS": "0", "models-INITIAL_FORMS": "0", "models-MIN_NUM_FORMS": "0",
            "models-MAX_NUM_FORMS": "1000", **fields}


def shown_messages(response) -> list[tuple[int, str]]:
    return [(m.level, str(m)) for m in response.context["messages"]]


def test_adding_a_server_discovers_its_models(transactional_db, client, operator, upstream):  # noqa: F811
    upstream.configure(models=["echo-1", "llama3"])
    client.force_login(operator)

    response = client.post(f"{LIST}add/", server_form(base_url=f"{upstream.url}/v1"), follow=True)

    assert response.status_code == 200
    server = ModelServer.objects.get(name="oa")
    assert shown_messages(response)[-2:] == [
        (messages.SUCCESS, "Model discovery: oa: 2 model(s) listed, 2 added, 0 no longer listed, 0 listed again."),
        (messages.INFO, chosen_text("oa/echo-1"))]  # the first chat model, there being no default
    assert set(Model.objects.filter(server=server).values_list("name", flat=True)) == {"echo-1", "llama3"}
    # the listing, then the chat path's check (a body refused before any model runs)
    assert [(r.method, r.path) for r in upstream.requests] == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]


def test_changing_a_server_discovers_again(transactional_db, client, operator, upstream):  # noqa: F811
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="old-model")
    upstream.configure(models=["echo-1"])
    client.force_login(operator)

    response = client.post(f"{LIST}{server.pk}/change/", server_form(base_url=f"{upstream.url}/v1",
                                                                      read_timeout="45"), follow=True)

    assert response.status_code == 200
    assert shown_messages(response)[-2:] == [
        (messages.SUCCESS, "Model discovery: oa: 1 model(s) listed, 1 added, 1 no longer listed, 0 listed again."),
        (messages.INFO, chosen_text("oa/echo-1"))]
    server.refresh_from_db()
    assert server.read_timeout == 45 and server.discovery_error == ""
    assert Model.objects.get(server=server, name="old-model").unlisted_since is not None


def test_a_server_that_does_not_answer_is_saved_with_a_warning(transactional_db, client, operator, closed_port):
    client.force_login(operator)

    response = client.post(f"{LIST}add/", server_form(base_url=f"http://127.0.0.1:{closed_port}/v1"), follow=True)

    assert response.status_code == 200
    server = ModelServer.objects.get(name="oa")
    assert shown_messages(response)[-1] == (
        messages.WARNING, "oa was saved, but model discovery failed: The model server could not be reached. "
                          "Run 'Discover models' once it answers.")
    assert server.discovery_error == "The model server could not be reached."
    assert not Model.objects.filter(server=server).exists()


def test_a_disabled_server_is_saved_without_asking_it(transactional_db, client, operator, upstream):  # noqa: F811
    client.force_login(operator)
    form = server_form(base_url=f"{upstream.url}/v1")
    del form["enabled"]

    response = client.post(f"{LIST}add/", form, follow=True)

    assert shown_messages(response)[-1] == (messages.INFO, "oa is disabled: model discovery was not run.")
    assert upstream.requests == []
