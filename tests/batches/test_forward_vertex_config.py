"""Where an operator lets a Google Vertex AI server forward batches: `applyconfig` and the console's server form
take `forward_batches` on a Vertex AI server with the Cloud Storage location of its batches (`batch_gcs_uri`),
refuse it without one by that key's place, refuse a location that is not gs://bucket[/folder], and refuse the
key on another kind of server; the registry's server carries it."""

import re
import textwrap
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gateway.models import ModelServer
from gateway.registry.snapshot import server_of
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db

VERTEX = "{name: gcp, kind: vertex, region: us-east5, project: my-project, forward_batches: true"


def apply(tmp_path, text: str) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    out = StringIO()
    call_command("applyconfig", str(path), stdout=out)
    return out.getvalue()


def test_applyconfig_takes_forwarding_on_vertex_with_its_cloud_storage_location(tmp_path):
    assert "servers: 1 created" in apply(tmp_path, f"servers:\n  - {VERTEX}, batch_gcs_uri: gs://gw-batches/gw}}\n")

    gcp = ModelServer.objects.get(name="gcp")
    assert (gcp.forward_batches, gcp.batch_gcs_uri) == (True, "gs://gw-batches/gw")
    assert server_of(gcp).cloud.batch_gcs_uri == "gs://gw-batches/gw"
    assert "servers: 1 unchanged" in apply(tmp_path, f"servers:\n  - {VERTEX}, batch_gcs_uri: gs://gw-batches/gw}}\n")


@pytest.mark.parametrize("entry,message", [
    (f"{VERTEX}}}", "servers[0].batch_gcs_uri: Forwarding batches to Vertex AI needs the Cloud Storage location "
                    "their input and output are written to (gs://bucket/folder)."),
    (f"{VERTEX}, batch_gcs_uri: s3://gw-batches/gw}}", "servers[0].batch_gcs_uri: A Cloud Storage location is "
                                                       "gs://bucket or gs://bucket/folder, e.g. "
                                                       "gs://my-bucket/gateway-batches."),
    (f"{VERTEX}, batch_gcs_uri: gs://Gw_Batches}}", "servers[0].batch_gcs_uri: A Cloud Storage location is "
                                                    "gs://bucket or gs://bucket/folder, e.g. "
                                                    "gs://my-bucket/gateway-batches."),
    ("{name: oa, base_url: https://api.openai.com/v1, batch_gcs_uri: gs://gw-batches}",
     "servers[0].batch_gcs_uri: only for a server of kind vertex"),
    ("{name: gem, kind: gemini, api_key: k, forward_batches: true}",
     "servers[0].forward_batches: Only an OpenAI-compatible, an Anthropic, an AWS Bedrock or a Google Vertex AI server "
     "has a batch API the gateway forwards batches to."),
])
def test_applyconfig_refuses_vertex_forwarding_it_cannot_do_by_its_place(tmp_path, entry, message):
    with pytest.raises(CommandError) as refused:
        apply(tmp_path, f"servers:\n  - {entry}\n")
    assert str(refused.value) == f"{tmp_path / 'gateway.yaml'}: {message}"
    assert not ModelServer.objects.exists()


def form(**fields) -> dict:
    return {"name": "gcp", "kind": "vertex", "region": "us-east5", "gcp_project": "my-project", "enabled": "on",
            "connect_timeout": "2", "read_timeout": "30", "structured_output": "tool", "forward_batches": "on",
            "models-TOTAL_FORMS": "0", "models-INITIAL_FORMS": "0", "models-MIN_NUM_FORMS": "0",
            "models-MAX_NUM_FORMS": "1000", **fields}


def test_the_server_form_asks_a_vertex_server_that_forwards_batches_for_its_cloud_storage_location(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    page = client.get("/admin/gateway/modelserver/add/").content.decode()
    assert 'name="batch_gcs_uri"' in page and "Google Vertex AI, to forward batches of Claude models" in page
    # shown only while the form's kind is vertex (unfold's conditional fields); unfold joins a row's
    # classes from a set, so the field's own class may come last, before the closing quote
    assert re.findall(r'field-batch_gcs_uri[\s"][^>]*x-show="([^"]*)"', page) == ["kind == &#x27;vertex&#x27;"]

    refused = client.post("/admin/gateway/modelserver/add/", form())
    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors == {"batch_gcs_uri": [
        "Forwarding batches to Vertex AI needs the Cloud Storage location their input and output are written to "
        "(gs://bucket/folder)."]}
    malformed = client.post("/admin/gateway/modelserver/add/", form(batch_gcs_uri="gs://"))
    assert malformed.context["adminform"].form.errors == {"batch_gcs_uri": [
        "A Cloud Storage location is gs://bucket or gs://bucket/folder, e.g. gs://my-bucket/gateway-batches."]}
    assert not ModelServer.objects.exists()

    saved = client.post("/admin/gateway/modelserver/add/", form(batch_gcs_uri="gs://gw-batches/gateway/batches"))
    assert saved.status_code == 302
    gcp = ModelServer.objects.get(name="gcp")
    assert (gcp.kind, gcp.forward_batches, gcp.batch_gcs_uri) == ("vertex", True, "gs://gw-batches/gateway/batches")
