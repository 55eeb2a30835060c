"""docs/configuration.md's Azure OpenAI example is a valid file, and it makes the servers it says."""

import asyncio
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from gateway.models import ModelServer
from gateway.registry.snapshot import server_of
from gateway.upstream.providers import azure, entra
from tests.gateway.upstream.azure.conftest import target_of

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[4] / "docs" / "configuration.md"


def test_the_documented_azure_servers_apply_as_documented(tmp_path, monkeypatch):
    section = DOC.read_text(encoding="utf-8").split("### An Azure OpenAI server", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key-from-the-environment")
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "entra-secret-from-the-environment")
    path = tmp_path / "gateway.yaml"
    path.write_text(example, encoding="utf-8")
    call_command("applyconfig", str(path), stdout=StringIO())

    keyed, gov = ModelServer.objects.get(name="azure"), ModelServer.objects.get(name="azure-gov")
    assert (keyed.kind, keyed.api_version, keyed.api_key, keyed.is_remote) == (
        "azure", "2024-10-21", "azure-key-from-the-environment", True)
    assert sorted(keyed.models.values_list("name", "supports_chat", "supports_embeddings")) == [
        ("embeddings-prod", False, True), ("gpt-4o-prod", True, False)]
    assert (gov.api_version, gov.azure_client_secret, gov.api_key) == ("v1", "entra-secret-from-the-environment", "")
    assert asyncio.run(azure.endpoint(target_of(keyed, "gpt-4o-prod"), "/chat/completions")) == (
        "https://myresource.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21",
        {"api-key": "azure-key-from-the-environment"})
    assert entra.Client.of(server_of(gov)) == entra.Client(
        gov.azure_tenant_id, gov.azure_client_id, "entra-secret-from-the-environment",
        "https://login.microsoftonline.us", "https://cognitiveservices.azure.us/.default", 5.0, 120.0)
