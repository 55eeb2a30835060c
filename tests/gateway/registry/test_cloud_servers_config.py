"""AWS Bedrock and Azure OpenAI servers as `applyconfig` and the model's own rules take them: a cloud's
settings, its secrets read from the environment variables the file names (never held by the file),
Bedrock's address from its region, and every missing or misplaced setting refused by its place."""

import textwrap
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from gateway.models import ModelServer
from gateway.registry.discovery import discover_models
from gateway.registry.snapshot import registry, server_of
from tests.factories import ModelFactory, ModelServerFactory

pytestmark = pytest.mark.django_db

CLOUDS = """
servers:
  - name: aws
    kind: bedrock
    region: us-east-1
    aws_access_key_id_env: AWS_ACCESS_KEY_ID
    aws_secret_access_key_env: AWS_SECRET_ACCESS_KEY
    aws_session_token_env: AWS_SESSION_TOKEN
    anthropic_betas: [interleaved-thinking-2025-05-14, context-1m-2025-08-07]
    models:
      - name: us.anthropic.claude-sonnet-4-5-20250929-v1:0
      - name: amazon.nova-pro-v1:0
  - name: az
    kind: azure
    base_url: https://myresource.openai.azure.com
    api_version: "2024-10-21"
    azure_tenant_id: 72f988bf-86f1-41af-91ab-2d7cd011db47
    azure_client_id: 0b8ffc1e-45a1-4b5c-9d2e-3f4a5b6c7d8e
    azure_client_secret_env: AZURE_CLIENT_SECRET
    azure_authority_host: https://login.microsoftonline.us
    models: [{name: my-gpt-4o-deployment}]
"""


@pytest.fixture(autouse=True)
def _cloud_secrets(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2VjEXAMPLETOKEN")
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "entra-secret-value")


def apply(tmp_path, text: str) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    out = StringIO()
    call_command("applyconfig", str(path), stdout=out)
    return out.getvalue()


def test_both_clouds_are_written_with_their_secrets_from_the_environment_and_applying_again_changes_nothing(
        tmp_path):
    out = apply(tmp_path, CLOUDS)
    assert "servers: 2 created" in out
    aws = ModelServer.objects.get(name="aws")
    assert (aws.kind, aws.region, aws.base_url, aws.is_remote) == (
        "bedrock", "us-east-1", "https://bedrock-runtime.us-east-1.amazonaws.com", True)
    assert (aws.aws_access_key_id, aws.aws_secret_access_key, aws.aws_session_token) == (
        "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "IQoJb3JpZ2luX2VjEXAMPLETOKEN")
    assert aws.anthropic_betas == "interleaved-thinking-2025-05-14\ncontext-1m-2025-08-07"
    az = ModelServer.objects.get(name="az")
    assert (az.kind, az.api_version, az.azure_tenant_id, az.azure_client_secret, az.azure_authority_host,
            az.is_remote, az.api_key) == ("azure", "2024-10-21", "72f988bf-86f1-41af-91ab-2d7cd011db47",
                                          "entra-secret-value", "https://login.microsoftonline.us", True, "")
    assert "servers: 2 unchanged" in apply(tmp_path, CLOUDS)

    held = {t.public_id: t.server for t in registry().by_id.values()}
    bedrock = held["aws/amazon.nova-pro-v1:0"]
    assert bedrock.cloud.anthropic_betas == ("interleaved-thinking-2025-05-14", "context-1m-2025-08-07")
    assert bedrock.cloud.aws_secret_access_key == "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert held["az/my-gpt-4o-deployment"].cloud.api_version == "2024-10-21"


def test_a_secret_the_file_leaves_out_is_kept_and_a_new_base_url_replaces_the_regions(tmp_path):
    apply(tmp_path, CLOUDS)
    apply(tmp_path, """
        servers:
          - name: aws
            kind: bedrock
            region: eu-west-3
            base_url: https://vpce-0a1b2c3d-bedrock-runtime.eu-west-3.vpce.amazonaws.com
    """)
    aws = ModelServer.objects.get(name="aws")
    assert aws.base_url == "https://vpce-0a1b2c3d-bedrock-runtime.eu-west-3.vpce.amazonaws.com"
    assert aws.region == "eu-west-3"
    assert aws.aws_secret_access_key == "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # kept: the file named none
    assert aws.anthropic_betas == ""  # the file is authoritative for what it can say: Bedrock's documented betas


@pytest.mark.parametrize("text, message", [
    ("- {name: aws, kind: bedrock}",
     r"servers\[0\]: a server needs a base_url \(or, on AWS Bedrock or Google Vertex AI, a region\)"),
    ("- {name: aws, kind: bedrock, region: us-east-1, aws_access_key_id_env: AWS_ACCESS_KEY_ID}",
     r"servers\[0\]\.aws_secret_access_key_env: Give the access key id and the secret access key together\."),
    ("- {name: aws, kind: bedrock, region: 'US East'}", r"servers\[0\]\.region: A region is lower-case"),
    ("- {name: aws, kind: bedrock, region: us-east-1, aws_session_token_env: NOT_SET_ANYWHERE}",
     r"servers\[0\]\.aws_session_token_env: environment variable NOT_SET_ANYWHERE is not set"),
    ("- {name: aws, kind: bedrock, region: us-east-1, anthropic_betas: context-1m-2025-08-07}",
     r"servers\[0\]\.anthropic_betas: must be a list"),
    ("- {name: az, kind: azure, base_url: 'https://r.openai.azure.com', api_key: k}",
     r"servers\[0\]\.api_version: An Azure OpenAI server needs its API version"),
    ("- {name: az, kind: azure, base_url: 'https://r.openai.azure.com', api_version: v1}",
     r"servers\[0\]\.api_key: An Azure OpenAI server needs an API key or Microsoft Entra ID's client credentials"),
    ("- {name: az, kind: azure, base_url: 'https://r.openai.azure.com', api_version: v1, azure_tenant_id: t}",
     r"servers\[0\]\.azure_client_secret_env: Microsoft Entra ID needs the tenant, the client id and its secret"),
    ("- {name: local, base_url: 'http://127.0.0.1:11434/v1', region: us-east-1}",
     r"servers\[0\]\.region: only for a server of kind bedrock or azure or vertex or gemini"),
])
def test_a_cloud_setting_missing_or_misplaced_is_refused_by_its_place_and_nothing_is_written(tmp_path, text,
                                                                                            message):
    with pytest.raises(CommandError, match=message):
        apply(tmp_path, f"servers:\n{textwrap.indent(text, '  ')}\n")
    assert not ModelServer.objects.exists()


def test_the_admins_rules_are_the_models_own():
    server = ModelServer(name="aws", kind="bedrock", region="ap-southeast-2")
    server.full_clean()
    assert server.base_url == "https://bedrock-runtime.ap-southeast-2.amazonaws.com"
    assert server.is_remote is True
    with pytest.raises(ValidationError) as caught:
        ModelServer(name="local", kind="openai").full_clean()
    assert caught.value.message_dict == {"base_url": ["This field is required."]}
    azure = ModelServer(name="az", kind="azure", base_url="https://r.openai.azure.com", api_version="v1",
                        api_key="k")
    azure.full_clean()
    assert server_of(azure).cloud.api_version == "v1"


def test_discovery_says_to_add_an_azure_deployment_by_name_and_leaves_its_models_alone():
    server = ModelServerFactory(name="az", kind="azure", base_url="https://r.openai.azure.com", api_version="v1",
                                api_key="k", is_remote=True)
    ModelFactory(server=server, name="my-deployment")
    [report] = discover_models(servers=[server])
    assert report.summary() == ("az: Azure OpenAI does not list the models it serves: add them by name (a "
                                "deployment's name on Azure OpenAI).")
    assert report.error is None
    assert list(server.models.values_list("name", "unlisted_since")) == [("my-deployment", None)]
