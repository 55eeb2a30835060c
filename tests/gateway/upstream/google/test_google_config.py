"""Google's servers as `applyconfig` and the model's own rules take them: docs/configuration.md's example
applies as documented (Vertex AI's address from its region, the Gemini API's from Google, a model's publisher
by its name), and every missing or misplaced setting is refused by its place, writing nothing."""

from __future__ import annotations

import textwrap
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gateway.models import ModelServer
from gateway.registry.snapshot import registry
from gateway.upstream.providers.google import transport, vertex

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[4] / "docs" / "configuration.md"


def apply(tmp_path, text: str) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    out = StringIO()
    call_command("applyconfig", str(path), stdout=out)
    return out.getvalue()


def test_the_documented_google_servers_apply_as_documented(tmp_path, monkeypatch):
    section = DOC.read_text(encoding="utf-8").split("### Google Vertex AI and the Gemini API", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-gemini-key-from-the-environment")
    assert "servers: 2 created" in apply(tmp_path, example)
    gcp, gem = ModelServer.objects.get(name="gcp"), ModelServer.objects.get(name="gem")
    assert (gcp.kind, gcp.gcp_project, gcp.region, gcp.gcp_credentials_file, gcp.base_url, gcp.is_remote) == (
        "vertex", "my-project", "us-east5", "/etc/gateway/sa.json", "https://us-east5-aiplatform.googleapis.com", True)
    assert (gem.kind, gem.base_url, gem.api_key, gem.is_remote) == (
        "gemini", "https://generativelanguage.googleapis.com", "AIza-gemini-key-from-the-environment", True)
    assert "servers: 2 unchanged" in apply(tmp_path, example)

    targets = {t.public_id: t for t in registry().by_id.values()}
    claude = targets["gcp/claude-sonnet-4-5@20250929"]
    assert vertex.wire(claude) == "anthropic" and vertex.wire(targets["gcp/gemini-2.5-pro"]) == "gemini"
    assert transport.model_url(claude, "streamRawPredict") == (
        "https://us-east5-aiplatform.googleapis.com/v1/projects/my-project/locations/us-east5/publishers/anthropic/"
        "models/claude-sonnet-4-5@20250929:streamRawPredict")
    assert transport.model_url(targets["gem/gemini-2.5-flash"], "streamGenerateContent") == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    assert claude.server.cloud.gcp_credentials_file == "/etc/gateway/sa.json"


def test_the_global_location_a_model_s_own_publisher_and_the_server_s_betas(tmp_path):
    apply(tmp_path, """
        servers:
          - name: gcp
            kind: vertex
            project: p-1
            region: global
            anthropic_betas: [interleaved-thinking-2025-05-14, thinking-token-count-2026-05-13]
            models:
              - {name: llama-4-maverick-17b-128e-instruct-maas, publisher: meta}
        """)
    target = next(iter(registry().by_id.values()))
    assert target.server.base_url == "https://aiplatform.googleapis.com" and target.publisher == "meta"
    assert target.server.cloud.anthropic_betas == ("interleaved-thinking-2025-05-14", "thinking-token-count-2026-05-13")
    assert transport.model_url(target, "streamGenerateContent").startswith(
        "https://aiplatform.googleapis.com/v1/projects/p-1/locations/global/publishers/meta/models/llama-4")


@pytest.mark.parametrize(("text", "message"), [
    ("- {name: gcp, kind: vertex, region: us-east5}",
     r"servers\[0\]\.project: A Google Vertex AI server needs its project"),
    ("- {name: gcp, kind: vertex, project: p}",
     r"servers\[0\]: a server needs a base_url \(or, on AWS Bedrock or Google Vertex AI, a region\)"),
    ("- {name: gem, kind: gemini}", r"servers\[0\]\.api_key: A Gemini API server needs an API key"),
    ("- {name: aws, kind: bedrock, region: us-east-1, project: p}",
     r"servers\[0\]\.project: only for a server of kind vertex"),
    ("- {name: gem, kind: gemini, api_key: k, models: [{name: gemini-2.5-flash, publisher: google}]}",
     r"servers\[0\]\.models\[0\]\.publisher: only for a model of a server of kind vertex"),
    ("- {name: gcp, kind: vertex, project: p, region: Us East}", r"servers\[0\]\.region: A region is lower-case"),
    ("- {name: gem, kind: gemini, api_key: k, anthropic_betas: [context-1m-2025-08-07]}",
     r"servers\[0\]\.anthropic_betas: only for a server of kind bedrock or vertex"),
])
def test_a_google_setting_missing_or_misplaced_is_refused_by_its_place(tmp_path, text, message):
    with pytest.raises(CommandError, match=message):
        apply(tmp_path, "servers:\n  " + text + "\n")
    assert not ModelServer.objects.exists()
