"""A model server's "Test connection" makes a real call through the gateway's own
upstream client and shows the answer or the exact error (bounded, never a 500, no key shown); saving
a server whose chat path answers 404 (an OpenAI-kind server without /v1) says so as a warning, and
discovery through Ollama's /api/tags no longer makes such a server look healthy."""

import re

import pytest
from django.contrib import messages
from django.contrib.auth.models import Permission
from django.test import Client

from gateway.models import Model, ModelServer
from gateway.registry.default_model import chosen_text
from gateway.registry.discovery import discover_models
from tests.factories import AccountFactory, ModelFactory, ModelServerFactory
from tests.upstream import running_upstream
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

LIST = "/admin/gateway/modelserver/"
SECRET = "sk-live-0123456789abcdefghijklmnop"


@pytest.fixture(autouse=True)
def _on_redis(db, redis_url):
    """Every test here on Redis (the cooldowns' and the servers' health)."""


@pytest.fixture
def admin_client(client):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))
    return client


def button_url(server) -> str:
    return f"{LIST}{server.pk}/test-connection/"


def message_after_test(client, server) -> tuple[int, str]:
    """(level, text) of the one message the test leaves on the server's page."""
    response = client.post(button_url(server), follow=True)
    assert response.redirect_chain == [(f"{LIST}{server.pk}/change/", 302)]
    [message] = list(response.context["messages"])
    return message.level, str(message)


def test_the_page_has_the_button(admin_client, upstream):  # noqa: F811
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    page = admin_client.get(f"{LIST}{server.pk}/change/").content.decode()
    assert re.search(r'<button type="submit" class="[^"]*" id="test-connection" formaction="'
                     + re.escape(button_url(server)) + r'" formmethod="post" formnovalidate>Test connection</button>',
                     page)
    assert 'id="test-connection"' not in admin_client.get(f"{LIST}add/").content.decode()


def test_it_makes_a_real_chat_call_and_shows_the_answer(admin_client, upstream):  # noqa: F811
    upstream.configure(reply="Hello from the reference upstream.")
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="b-embed", supports_chat=False, supports_embeddings=True)
    ModelFactory(server=server, name="echo-1")

    level, text = message_after_test(admin_client, server)

    assert (level, text) == (messages.SUCCESS, "Chat call to oa/echo-1 answered: “Hello from the reference upstream.”")
    request = upstream.last
    assert (request.method, request.path, request.json["model"]) == ("POST", "/v1/chat/completions", "echo-1")


def test_a_server_with_embedding_models_only_is_tested_with_embeddings(admin_client, upstream):  # noqa: F811
    upstream.configure(embedding_dim=12)
    server = ModelServerFactory(name="emb", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="nomic-embed", supports_chat=False, supports_embeddings=True)

    assert message_after_test(admin_client, server) == (messages.SUCCESS,
                                            "Embeddings call to emb/nomic-embed answered: a vector of 12 numbers")
    assert upstream.last.path == "/v1/embeddings"


def test_a_wrong_base_url_shows_the_server_s_404(admin_client, upstream):  # noqa: F811
    server = ModelServerFactory(name="noroot", base_url=upstream.url)  # no /v1
    ModelFactory(server=server, name="echo-1")

    assert message_after_test(admin_client, server) == (
        messages.ERROR, "Chat call to noroot/echo-1 failed: 404 Unknown request URL: POST /chat/completions.")


def test_a_closed_port_shows_that_nothing_answers(admin_client, closed_port):
    server = ModelServerFactory(name="gone", base_url=f"http://127.0.0.1:{closed_port}/v1")
    ModelFactory(server=server, name="m")

    level, text = message_after_test(admin_client, server)

    assert level == messages.ERROR
    assert re.fullmatch(r"Chat call to gone/m failed: 503 The model server could not be reached\. "
                        r"\(connect failed \(.+\)\)", text), text


def test_a_server_that_does_not_answer_in_time_is_given_up(admin_client, upstream):  # noqa: F811
    upstream.configure(latency_ms=5000)
    server = ModelServerFactory(name="slow", base_url=f"{upstream.url}/v1", connect_timeout=2, read_timeout=1)
    ModelFactory(server=server, name="echo-1")

    assert message_after_test(admin_client, server) == (
        messages.ERROR, "Chat call to slow/echo-1 failed: 504 The model server did not answer in time. "
                        "(read timeout before the first byte)")


def test_the_key_a_server_echoes_is_not_shown(admin_client, upstream):  # noqa: F811
    upstream.configure(require_key="sk-the-right-one-abcdefghijklmn", leak_credentials=True)
    server = ModelServerFactory(name="leaky", base_url=f"{upstream.url}/v1", api_key=SECRET)
    ModelFactory(server=server, name="echo-1")

    level, text = message_after_test(admin_client, server)

    assert level == messages.ERROR and text.startswith("Chat call to leaky/echo-1 failed: 401 ")
    assert SECRET not in text and SECRET[:12] not in text


def test_a_server_without_a_model_says_what_to_do(admin_client, upstream):  # noqa: F811
    server = ModelServerFactory(name="empty", base_url=f"{upstream.url}/v1")
    assert message_after_test(admin_client, server) == (messages.ERROR, "empty has no enabled model that takes chat or "
                                                            "embeddings: run 'Discover models', or add one below.")
    assert upstream.requests == []


def test_it_is_a_post_with_csrf_for_staff_who_may_change_servers(upstream):  # noqa: F811
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="echo-1")
    client = Client(enforce_csrf_checks=True)
    client.force_login(AccountFactory(is_staff=True, is_superuser=True))
    assert client.get(button_url(server)).status_code == 405
    assert client.post(button_url(server)).status_code == 403  # no CSRF token
    viewer = AccountFactory(is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_modelserver"))
    assert Client().post(button_url(server))["Location"].startswith("/admin/login/")
    plain = Client()
    plain.force_login(viewer)
    assert plain.post(button_url(server)).status_code == 403
    assert upstream.requests == []


# --- On save ----------------------------------------------------------------------------------


def server_form(**fields) -> dict:
    return {"name": "oa", "kind": "openai", "enabled": "on", "connect_timeout": "2", "read_timeout": "30",
            "structured_output": "tool",
            "models-TOTAL_FORMS": "0", "models-INITIAL_FORMS": "0", "models-MIN_NUM_FORMS": "0",
            "models-MAX_NUM_FORMS": "1000", **fields}


def saved_messages(client, **fields) -> list[tuple[int, str]]:
    response = client.post(f"{LIST}add/", server_form(**fields), follow=True)
    assert response.status_code == 200
    return [(m.level, str(m)) for m in response.context["messages"]]


@pytest.mark.django_db(transaction=True)
def test_saving_a_base_url_without_v1_warns_instead_of_reporting_success(admin_client, upstream):  # noqa: F811
    said = saved_messages(admin_client, base_url=upstream.url)

    assert said[-2:] == [
        (messages.WARNING, "oa was saved, but model discovery failed: GET /models answered 404, but this address "
                           "answers Ollama's /api/tags: it is the root of an Ollama server, whose OpenAI-compatible "
                           "API (where chat calls go) is under /v1. Add /v1 to the base URL. Run 'Discover models' "
                           "once it answers."),
        (messages.WARNING, "oa was saved, but POST /chat/completions answered 404 (Unknown request URL: POST "
                           "/chat/completions.): chat calls to this server will fail. Check the base URL. An "
                           "OpenAI-compatible server's base URL usually ends with /v1.")]
    assert not any(level == messages.SUCCESS for level, _ in said)
    server = ModelServer.objects.get(name="oa")
    assert not Model.objects.filter(server=server).exists()
    assert server.discovery_error.startswith("GET /models answered 404, but this address answers Ollama's")


@pytest.mark.django_db(transaction=True)
def test_saving_a_right_base_url_reports_success_after_a_free_check(admin_client, upstream):  # noqa: F811
    said = saved_messages(admin_client, base_url=f"{upstream.url}/v1")

    assert said[-2:] == [(messages.SUCCESS, "Model discovery: oa: 1 model(s) listed, 1 added, 0 no longer listed, "
                                            "0 listed again."), (messages.INFO, chosen_text("oa/echo-1"))]
    checked = upstream.last
    assert (checked.method, checked.path, checked.json["model"]) == ("POST", "/v1/chat/completions", "echo-1")
    assert not isinstance(checked.json["messages"], list)  # refused before any model runs


@pytest.mark.django_db(transaction=True)
def test_saving_a_server_whose_chat_path_refuses_the_key_warns(admin_client):
    with running_upstream(models=["echo-1"]) as other:
        other.configure(require_key="sk-the-right-one-abcdefghijklmn")
        said = saved_messages(admin_client, base_url=f"{other.url}/v1", api_key=SECRET)
    assert said[-1][0] == messages.WARNING
    assert said[-1][1].startswith("oa was saved, but POST /chat/completions answered 401 (")
    assert said[-1][1].endswith("): the server refuses its API key, so chat calls will fail. Check the API key.")
    assert SECRET not in said[-1][1]


def test_discovery_no_longer_lists_an_ollama_root_as_healthy(upstream):  # noqa: F811
    root = ModelServerFactory(name="root", base_url=upstream.url)
    [report] = discover_models(servers=[root])
    assert report.models is None and report.error.endswith("Add /v1 to the base URL.")
    with running_upstream(ollama_only=True, models=["qwen2:7b"]) as ollama:  # /v1 given: an older Ollama still lists
        listed = ModelServerFactory(name="ol", base_url=f"{ollama.url}/v1")
        [report] = discover_models(servers=[listed])
    assert report.error is None and report.added == ["qwen2:7b"]
