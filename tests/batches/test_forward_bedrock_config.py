"""Where an operator lets an AWS Bedrock server take batches (batches/clouds_bedrock.py): `applyconfig` and the
console's server form take `forward_batches` on a Bedrock server only with the S3 location its jobs use and the
IAM role they run as, check both (and the S3 endpoint) by their shapes, refuse each missing one at its own
place, and refuse the three on any other kind of server."""

import textwrap
from io import StringIO
from pathlib import Path

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.core.management.base import CommandError

from gateway.models import ModelServer
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db

ROLE = "arn:aws:iam::123456789012:role/service-role/BedrockBatch"
BEDROCK = "{name: aws, kind: bedrock, region: us-east-1, forward_batches: true"


def apply(tmp_path, text: str) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    out = StringIO()
    call_command("applyconfig", str(path), stdout=out)
    return out.getvalue()


def test_applyconfig_sets_a_bedrock_servers_batch_settings_and_clears_them_when_left_out(tmp_path):
    out = apply(tmp_path, f"""
        servers:
          - {BEDROCK}, batch_s3_uri: s3://my-bucket/gateway/batches, batch_role_arn: "{ROLE}",
             batch_s3_endpoint_url: https://bucket.vpce-0abc.s3.us-east-1.vpce.amazonaws.com}}
        """)
    assert "servers: 1 created" in out
    assert ModelServer.objects.filter(name="aws").values(
        "forward_batches", "batch_s3_uri", "batch_role_arn", "batch_s3_endpoint_url").get() == {
        "forward_batches": True, "batch_s3_uri": "s3://my-bucket/gateway/batches", "batch_role_arn": ROLE,
        "batch_s3_endpoint_url": "https://bucket.vpce-0abc.s3.us-east-1.vpce.amazonaws.com"}

    apply(tmp_path, "servers:\n  - {name: aws, kind: bedrock, region: us-east-1}\n")
    assert ModelServer.objects.filter(name="aws").values_list(
        "forward_batches", "batch_s3_uri", "batch_role_arn", "batch_s3_endpoint_url").get() == (False, "", "", "")


@pytest.mark.parametrize("entry,message", [
    (f"{BEDROCK}}}", "servers[0].batch_s3_uri: Forwarding batches to AWS Bedrock needs the S3 location its jobs use."),
    (f"{BEDROCK}, batch_s3_uri: s3://my-bucket}}",
     "servers[0].batch_role_arn: Forwarding batches to AWS Bedrock needs the IAM role its jobs run as."),
    (f"{BEDROCK}, batch_s3_uri: 'https://my-bucket.s3.amazonaws.com/batches', batch_role_arn: '{ROLE}'}}",
     "servers[0].batch_s3_uri: An S3 location is s3://bucket or s3://bucket/prefix, e.g. s3://my-bucket/batches."),
    (f"{BEDROCK}, batch_s3_uri: s3://My_Bucket/x, batch_role_arn: '{ROLE}'}}",
     "servers[0].batch_s3_uri: An S3 location is s3://bucket or s3://bucket/prefix, e.g. s3://my-bucket/batches."),
    (f"{BEDROCK}, batch_s3_uri: s3://my-bucket, batch_role_arn: 'arn:aws:iam::123:role/Short'}}",
     "servers[0].batch_role_arn: An IAM role's ARN, e.g. arn:aws:iam::123456789012:role/BedrockBatch."),
    (f"{BEDROCK}, batch_s3_uri: s3://my-bucket, batch_role_arn: 'arn:aws:iam::123456789012:user/someone'}}",
     "servers[0].batch_role_arn: An IAM role's ARN, e.g. arn:aws:iam::123456789012:role/BedrockBatch."),
    (f"{BEDROCK}, batch_s3_uri: s3://my-bucket, batch_role_arn: '{ROLE}', batch_s3_endpoint_url: s3.local}}",
     "servers[0].batch_s3_endpoint_url: Enter a valid http(s) URL, for example http://127.0.0.1:11434/v1."),
    ("{name: oa, base_url: https://api.openai.com/v1, batch_s3_uri: s3://my-bucket}",
     "servers[0].batch_s3_uri: only for a server of kind bedrock"),
    ("{name: vx, kind: vertex, region: us-east5, project: p, batch_role_arn: 'arn:aws:iam::123456789012:role/R'}",
     "servers[0].batch_role_arn: only for a server of kind bedrock"),
])
def test_applyconfig_refuses_a_bedrock_batch_setting_missing_malformed_or_misplaced_by_its_place(tmp_path, entry,
                                                                                                  message):
    with pytest.raises(CommandError) as refused:
        apply(tmp_path, f"servers:\n  - {entry}\n")
    assert str(refused.value) == f"{tmp_path / 'gateway.yaml'}: {message}"
    assert not ModelServer.objects.exists()


def test_the_documented_bedrock_server_forwards_batches_with_its_settings(tmp_path, monkeypatch):
    """docs/configuration.md's example of the clouds' own keys applies, its Bedrock server ready to forward."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    example = doc.split("| `credentials_file` | `vertex` |", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
    apply(tmp_path, example)
    assert ModelServer.objects.filter(name="aws").values_list("forward_batches", "batch_s3_uri", "batch_role_arn",
                                                              "batch_s3_endpoint_url").get() == (
        True, "s3://my-bucket/gateway-batches", "arn:aws:iam::123456789012:role/BedrockBatch", "")


def test_a_bedrock_server_without_forwarding_needs_neither_setting(tmp_path):
    apply(tmp_path, "servers:\n  - {name: aws, kind: bedrock, region: us-east-1}\n")
    assert ModelServer.objects.get(name="aws").forward_batches is False


def form(**fields) -> dict:
    return {"name": "aws", "kind": "bedrock", "region": "us-east-1", "enabled": "on", "connect_timeout": "2",
            "read_timeout": "30", "structured_output": "tool", "models-TOTAL_FORMS": "0", "models-INITIAL_FORMS": "0",
            "models-MIN_NUM_FORMS": "0", "models-MAX_NUM_FORMS": "1000", **fields}


def test_the_server_form_shows_the_batch_settings_for_bedrock_and_refuses_forwarding_without_them(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    page = client.get("/admin/gateway/modelserver/add/").content.decode()
    shown = admin.site._registry[ModelServer].conditional_fields
    for name in ("batch_s3_uri", "batch_role_arn", "batch_s3_endpoint_url"):
        assert f'name="{name}"' in page and shown[name] == "kind == 'bedrock'"  # shown while the kind is Bedrock

    refused = client.post("/admin/gateway/modelserver/add/", form(forward_batches="on"))
    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors == {
        "batch_s3_uri": ["Forwarding batches to AWS Bedrock needs the S3 location its jobs use."],
        "batch_role_arn": ["Forwarding batches to AWS Bedrock needs the IAM role its jobs run as."]}
    malformed = client.post("/admin/gateway/modelserver/add/", form(forward_batches="on", batch_s3_uri="my-bucket",
                                                                    batch_role_arn=ROLE))
    assert malformed.context["adminform"].form.errors == {"batch_s3_uri": [
        "An S3 location is s3://bucket or s3://bucket/prefix, e.g. s3://my-bucket/batches."]}
    assert not ModelServer.objects.exists()

    saved = client.post("/admin/gateway/modelserver/add/", form(forward_batches="on", batch_s3_uri="s3://my-bucket/b",
                                                                batch_role_arn=ROLE))
    assert saved.status_code == 302
    assert ModelServer.objects.filter(name="aws").values_list("forward_batches", "batch_s3_uri", "batch_role_arn",
                                                              "base_url").get() == (
        True, "s3://my-bucket/b", ROLE, "https://bedrock-runtime.us-east-1.amazonaws.com")
