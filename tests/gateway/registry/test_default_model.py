"""The default model chosen by itself (gateway/registry/default_model.py): when the first chat
models appear through discovery, applyconfig or the console's Models page, the first becomes the
default; an existing default is never replaced; a model that cannot chat is never chosen."""

from io import StringIO

import pytest
from django.core.management import call_command

from gateway.models import Model
from gateway.registry.default_model import chosen_text
from gateway.registry.discovery import discover_models
from gateway.registry.snapshot import registry
from tests.factories import ModelFactory, ModelServerFactory
from tests.gateway.console.test_server_health_admin import server_form
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db


def defaults():
    return [m.public_id for m in Model.objects.filter(is_default=True)]


def test_discovery_finding_exactly_one_chat_model_makes_it_the_default(upstream):  # noqa: F811
    upstream.configure(models=["only-one"])
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")

    [report] = discover_models(servers=[server])

    assert report.default_chosen == "oa/only-one"
    assert defaults() == ["oa/only-one"]
    assert registry().default.public_id == "oa/only-one"  # the registry heard of it


def test_discovery_of_several_chooses_the_first_chat_model_it_listed_never_an_embedding_one(upstream):  # noqa: F811
    upstream.configure(models=["text-embedding-3-small", "chat-b", "chat-a"])
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")

    discover_models(servers=[server])

    assert defaults() == ["oa/chat-b"]


def test_discovery_never_replaces_a_default_the_operator_chose(upstream):  # noqa: F811
    ModelFactory(server=ModelServerFactory(name="mine"), name="picked", is_default=True)
    upstream.configure(models=["newcomer"])
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")

    [report] = discover_models(servers=[server])

    assert report.default_chosen is None
    assert defaults() == ["mine/picked"]


def test_a_failed_discovery_still_chooses_among_models_added_by_hand_on_the_server(upstream):  # noqa: F811
    server = ModelServerFactory(name="dead", base_url="http://127.0.0.1:9/v1")
    ModelFactory(server=server, name="typed-in")

    [report] = discover_models(servers=[server])

    assert report.error and defaults() == ["dead/typed-in"]


def test_applyconfig_without_a_default_model_chooses_the_first_chat_model_of_the_file(tmp_path):
    path = tmp_path / "gateway.yaml"
    path.write_text("servers:\n  - name: local\n    kind: openai\n    base_url: http://127.0.0.1:11434/v1\n"
                    "    models:\n      - {name: nomic-embed-text, chat: false, embeddings: true}\n"
                    "      - {name: llama3}\n      - {name: qwen}\n", encoding="utf-8")
    out = StringIO()

    call_command("applyconfig", str(path), stdout=out)

    assert defaults() == ["local/llama3"]
    assert "default model: local/llama3 (chosen automatically)" in out.getvalue()
    out = StringIO()
    call_command("applyconfig", str(path), stdout=out)  # applied again: nothing to choose, nothing said
    assert defaults() == ["local/llama3"] and "default model" not in out.getvalue()


def test_applyconfig_never_replaces_an_existing_default(tmp_path):
    ModelFactory(server=ModelServerFactory(name="mine"), name="picked", is_default=True)
    path = tmp_path / "gateway.yaml"
    path.write_text("servers:\n  - name: local\n    kind: openai\n    base_url: http://127.0.0.1:11434/v1\n"
                    "    models: [{name: llama3}]\n", encoding="utf-8")

    call_command("applyconfig", str(path), stdout=StringIO())

    assert defaults() == ["mine/picked"]


def test_a_chat_model_saved_in_the_console_becomes_the_default_when_there_is_none(admin_client):
    server = ModelServerFactory(name="srv")
    form = {"server": server.pk, "name": "first", "supports_chat": "on", "enabled": "on", "context_window": 8192,
            "batch_discount_percent": 50, "fallback_links-TOTAL_FORMS": 0, "fallback_links-INITIAL_FORMS": 0}

    response = admin_client.post("/admin/gateway/model/add/", form, follow=True)

    assert response.status_code == 200
    assert defaults() == ["srv/first"]
    assert any("srv/first is now the default model" in str(m) for m in response.context["messages"])
    admin_client.post("/admin/gateway/model/add/", {**form, "name": "second"}, follow=True)
    assert defaults() == ["srv/first"]  # the second one is not the first chat model


def test_a_price_changed_in_the_console_chooses_no_default(admin_client):
    model = ModelFactory(server=ModelServerFactory(name="srv"), name="old")
    form = {"server": model.server_id, "name": "old", "supports_chat": "on", "enabled": "on", "context_window": 8192,
            "batch_discount_percent": 50, "output_price": "1.25", "fallback_links-TOTAL_FORMS": 0,
            "fallback_links-INITIAL_FORMS": 0}

    admin_client.post(f"/admin/gateway/model/{model.pk}/change/", form)

    assert defaults() == []
    del form["enabled"]
    admin_client.post(f"/admin/gateway/model/{model.pk}/change/", form)  # switched off
    form["enabled"] = "on"
    admin_client.post(f"/admin/gateway/model/{model.pk}/change/", form)  # on again: it appears as a chat model
    assert defaults() == ["srv/old"]


def test_a_server_added_in_the_console_says_which_model_became_the_default(transactional_db, admin_client,
                                                                         upstream):  # noqa: F811
    """Discovery runs once the save has committed: a transaction of the test's own would hold it back."""
    upstream.configure(models=["only-one"])

    response = admin_client.post("/admin/gateway/modelserver/add/", server_form(base_url=f"{upstream.url}/v1"),
                                 follow=True)

    assert defaults() == ["oa/only-one"]
    assert chosen_text("oa/only-one") in [str(m) for m in response.context["messages"]]
    again = admin_client.post("/admin/gateway/modelserver/", {"action": "discover_models", "_selected_action":
                                                                  Model.objects.get().server_id}, follow=True)
    assert not any("default model" in str(m) for m in again.context["messages"])  # it was chosen already


def test_the_discover_action_says_which_model_became_the_default(admin_client, upstream):  # noqa: F811
    upstream.configure(models=["only-one"])
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")

    response = admin_client.post("/admin/gateway/modelserver/", {"action": "discover_models",
                                                                 "_selected_action": server.pk}, follow=True)

    assert defaults() == ["oa/only-one"]
    assert chosen_text("oa/only-one") in [str(m) for m in response.context["messages"]]
