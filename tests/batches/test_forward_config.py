"""Where an operator turns forwarding on (`ModelServer.forward_batches`): `applyconfig` and the console's
server form, each taking it on an OpenAI-compatible, an Anthropic or an AWS Bedrock server only (Bedrock's own
settings: tests/batches/test_forward_bedrock_config.py) and refusing it by its place on any other kind."""

import textwrap
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gateway.models import ModelServer
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db


def apply(tmp_path, text: str) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    out = StringIO()
    call_command("applyconfig", str(path), stdout=out)
    return out.getvalue()


def test_applyconfig_turns_forwarding_on_for_openai_and_anthropic_servers_and_off_when_left_out(tmp_path):
    out = apply(tmp_path, """
        servers:
          - {name: oa, kind: openai, base_url: https://api.openai.com/v1, forward_batches: true,
             models: [{name: gpt-4o-mini}]}
          - {name: claude, kind: anthropic, base_url: https://api.anthropic.com, forward_batches: true}
          - {name: local, base_url: http://127.0.0.1:11434/v1}
        """)
    assert "servers: 3 created" in out
    assert dict(ModelServer.objects.values_list("name", "forward_batches")) == {"oa": True, "claude": True,
                                                                                "local": False}

    apply(tmp_path, """
        servers:
          - {name: oa, kind: openai, base_url: https://api.openai.com/v1}
        """)
    assert ModelServer.objects.get(name="oa").forward_batches is False  # the file is authoritative


@pytest.mark.parametrize("entry,message", [
    ("{name: gem, kind: gemini, api_key: k, forward_batches: true}",
     "servers[0].forward_batches: Only an OpenAI-compatible, an Anthropic, an AWS Bedrock or a Google Vertex AI server "
     "has a batch API the gateway forwards batches to."),
    ("{name: oa, base_url: https://api.openai.com/v1, forward_batches: 'yes'}",
     "servers[0].forward_batches: must be true or false"),
])
def test_applyconfig_refuses_forwarding_it_cannot_do_by_its_place(tmp_path, entry, message):
    with pytest.raises(CommandError) as refused:
        apply(tmp_path, f"servers:\n  - {entry}\n")
    assert str(refused.value) == f"{tmp_path / 'gateway.yaml'}: {message}"
    assert not ModelServer.objects.exists()


def form(**fields) -> dict:
    return {"name": "srv", "kind": "openai", "base_url": "https://api.openai.com/v1", "enabled": "on",
            "connect_timeout": "2", "read_timeout": "30", "structured_output": "tool", "models-TOTAL_FORMS": "0",
            "models-INITIAL_FORMS": "0", "models-MIN_NUM_FORMS": "0", "models-MAX_NUM_FORMS": "1000", **fields}


def test_the_server_form_offers_forwarding_and_refuses_it_on_a_kind_without_a_batch_api(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    page = client.get("/admin/gateway/modelserver/add/").content.decode()
    assert 'name="forward_batches"' in page
    assert "OpenAI-compatible, Anthropic, AWS Bedrock and Google Vertex AI servers only" in page

    refused = client.post("/admin/gateway/modelserver/add/", form(kind="gemini", api_key="g-key",
                                                                  forward_batches="on"))
    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors == {"forward_batches": [
        "Only an OpenAI-compatible, an Anthropic, an AWS Bedrock or a Google Vertex AI server has a batch API the "
        "gateway forwards batches to."]}
    assert not ModelServer.objects.exists()

    saved = client.post("/admin/gateway/modelserver/add/", form(kind="anthropic", base_url="https://api.anthropic.com",
                                                                api_key="a-key", forward_batches="on"))
    assert saved.status_code == 302
    assert ModelServer.objects.get(name="srv").forward_batches is True
