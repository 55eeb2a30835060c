"""A Vertex AI server added in the console: its own settings shown only while the kind is Vertex AI (its
location in the region's field, shared with Bedrock), the address left empty becomes the location's, and saving
it discovers its Google models with the service account's token."""

from __future__ import annotations

import pytest
from django.contrib import admin, messages

from gateway.models import Model, ModelServer
from gateway.registry.default_model import chosen_text
from tests.factories import AccountFactory
from tests.gateway.upstream.google.fake import PROJECT, REGION
from tests.gateway.upstream.google.support import fake_google, key_file  # noqa: F401 — the fixtures

LIST = "/admin/gateway/modelserver/"


@pytest.fixture
def operator(client):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))
    return client


def form(**fields) -> dict:
    return {"name": "gcp", "kind": "vertex", "enabled": "on", "connect_timeout": "2", "read_timeout": "30",
            "structured_output": "tool", "models-TOTAL_FORMS": "0", "models-INITIAL_FORMS": "0",
            "models-MIN_NUM_FORMS": "0", "models-MAX_NUM_FORMS": "1000", **fields}


def test_vertex_s_settings_show_for_vertex_only():
    shown = admin.site._registry[ModelServer].conditional_fields
    assert shown["gcp_project"] == shown["gcp_credentials_file"] == "kind == 'vertex'"
    assert shown["region"] == "['bedrock', 'vertex'].includes(kind)"
    assert "'vertex'" in shown["structured_output"] and "'vertex'" not in shown["is_remote"]


def test_a_vertex_server_added_in_the_console_discovers_its_models(transactional_db, operator, fake_google,  # noqa: F811
                                                                 key_file):
    response = operator.post(f"{LIST}add/", form(base_url=fake_google.url, region=REGION, gcp_project=PROJECT,
                                                 gcp_credentials_file=key_file), follow=True)
    assert response.status_code == 200
    server = ModelServer.objects.get(name="gcp")
    assert (server.is_remote, server.gcp_project, server.gcp_credentials_file) == (True, PROJECT, key_file)
    said = [(m.level, str(m)) for m in response.context["messages"]][-2:]
    assert said == [(messages.SUCCESS, "Model discovery: gcp: 4 model(s) listed, 4 added, 0 no longer listed, "
                                       "0 listed again."),
                    (messages.INFO, chosen_text("gcp/gemini-2.5-pro"))]  # the first chat model, there being none
    assert "gemini-2.5-pro" in set(Model.objects.filter(server=server).values_list("name", flat=True))


def test_the_address_left_empty_is_the_location_s_and_the_project_is_required(db, operator):
    response = operator.post(f"{LIST}add/", form(region="europe-west1"))
    assert "A Google Vertex AI server needs its project." in response.content.decode()
    operator.post(f"{LIST}add/", form(region="global", gcp_project=PROJECT, enabled=""))
    assert ModelServer.objects.get(name="gcp").base_url == "https://aiplatform.googleapis.com"
