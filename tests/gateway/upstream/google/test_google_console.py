"""Google's servers from the operator's side: model discovery (the Gemini API's models that generate or embed,
Vertex AI's Google models, every page, with the key or the token the calls use) and "Test connection"."""

from __future__ import annotations

import pytest

from gateway.console import server_check
from gateway.models import Model
from gateway.registry.discovery import discover_models
from tests.factories import ModelFactory, ModelServerFactory
from tests.gateway.upstream.google.fake import API_KEY, CLAUDE, PROJECT, REGION
from tests.gateway.upstream.google.support import fake_google, key_file  # noqa: F401 — the fixtures

pytestmark = pytest.mark.django_db


def vertex_server(fake, key_file, **fields):
    return ModelServerFactory(name="gcp", kind="vertex", base_url=fake.url, region=REGION, gcp_project=PROJECT,
                              gcp_credentials_file=key_file, is_remote=True, **fields)


def test_discovery_of_the_gemini_api_lists_the_models_that_generate_or_embed(fake_google):  # noqa: F811
    server = ModelServerFactory(name="gem", kind="gemini", base_url=fake_google.url, api_key=API_KEY, is_remote=True)
    [report] = discover_models(servers=[server])
    assert report.error is None, report.error
    found = {m.name: (m.supports_chat, m.supports_embeddings) for m in Model.objects.filter(server=server)}
    assert found == {"gemini-2.5-flash": (True, False), "gemini-2.5-pro": (True, False),
                     "gemini-embedding-001": (False, True)}
    assert [(r.path, r.query) for r in fake_google.requests] == [
        ("/v1beta/models", "pageSize=1000"), ("/v1beta/models", "pageSize=1000&pageToken=2"),
        ("/v1beta/models", "pageSize=1000&pageToken=4")]
    assert {r.headers["x-goog-api-key"] for r in fake_google.requests} == {API_KEY}

    server.api_key = "AIzaWrongKey01"
    server.save()
    [report] = discover_models(servers=[server])
    assert report.error == "GET /v1beta/models answered 400."


def test_discovery_of_vertex_ai_lists_google_s_gemini_and_embedding_models(fake_google, key_file):  # noqa: F811
    server = vertex_server(fake_google, key_file)
    [report] = discover_models(servers=[server])
    assert report.error is None, report.error
    found = {m.name: (m.supports_chat, m.supports_embeddings) for m in Model.objects.filter(server=server)}
    assert found == {"gemini-2.5-pro": (True, False), "gemini-2.5-flash": (True, False),
                     "text-embedding-005": (False, True), "gemini-embedding-001": (False, True)}
    listings = [r for r in fake_google.requests if r.path != "/token"]
    assert [r.path for r in listings] == ["/v1beta1/publishers/google/models"] * 4
    assert all(r.problem is None and r.headers["authorization"].startswith("Bearer ya29.") for r in listings)


def test_discovery_of_vertex_ai_without_a_token_says_why(fake_google, tmp_path):  # noqa: F811
    server = vertex_server(fake_google, str(tmp_path / "missing.json"))
    [report] = discover_models(servers=[server])
    assert report.error.startswith("Google gave no access token for server 'gcp' (the service account of ")
    assert not fake_google.requests


def test_test_connection_calls_claude_on_vertex(fake_google, key_file):  # noqa: F811
    server = vertex_server(fake_google, key_file)
    ModelFactory(server=server, name=CLAUDE)
    outcome = server_check.connection_test(row=server)
    assert outcome.ok, outcome.message
    assert outcome.message.startswith(f"Chat call to gcp/{CLAUDE} answered: “Echo: This is a connection test")
    fake_google.configure(fail_status="PERMISSION_DENIED", fail_code=403,
                          fail_message="Permission 'aiplatform.endpoints.predict' denied on resource.")
    outcome = server_check.connection_test(row=server)
    assert (outcome.ok, outcome.message) == (
        False, f"Chat call to gcp/{CLAUDE} failed: 403 PERMISSION_DENIED: Permission 'aiplatform.endpoints.predict' "
               "denied on resource.")


def test_test_connection_asks_a_model_at_its_own_publisher(fake_google, key_file):  # noqa: F811
    server = vertex_server(fake_google, key_file)
    ModelFactory(server=server, name="my-tuned-sonnet", publisher="anthropic")
    outcome = server_check.connection_test(row=server)
    assert outcome.ok, outcome.message
    assert fake_google.calls()[-1].path.endswith("/publishers/anthropic/models/my-tuned-sonnet:streamRawPredict")
