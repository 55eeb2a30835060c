"""What the gateway sends a Claude model on Bedrock, against AWS's own SDK and the anthropic SDK's Bedrock client
sent at the same fake: the same path, body and signed headers, and a signature botocore verifies from the
credentials (the server's key pair, AWS's credential chain, refreshed credentials); a Bedrock API key as a bearer
token with nothing signed."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone

import anthropic
import boto3
import pytest
from botocore.credentials import RefreshableCredentials

from gateway.registry import aws_auth
from gateway.upstream.providers import bedrock
from gateway.upstream.providers.base import UpstreamError
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, CLAUDE, PROFILE, REGION, SECRET_KEY
from tests.gateway.upstream.bedrock.support import collect, fake_bedrock, target  # noqa: F401 — a fixture

MESSAGES = [{"role": "user", "content": "one two"}]
ARN = f"arn:aws:bedrock:{REGION}:123456789012:inference-profile/{PROFILE}"
BOTO_SIGNED = ["content-type", "host", "x-amz-date", "x-amzn-bedrock-accept"]


def boto3_stream(fake, model: str, body: dict, **credentials) -> list[str]:
    """boto3's InvokeModelWithResponseStream at the fake: the Messages events it read."""
    client = boto3.client("bedrock-runtime", endpoint_url=fake.url, region_name=REGION,
                          **({"aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY} | credentials))
    reply = client.invoke_model_with_response_stream(modelId=model, body=json.dumps(body),
                                                     contentType="application/json", accept="application/json")
    return [json.loads(event["chunk"]["bytes"])["type"] for event in reply["body"]]


def gateway_stream(fake, model: str, headers: dict | None = None, **cloud) -> list[dict]:
    body = {"model": "aws/x", "max_tokens": 50, "messages": MESSAGES, "stream": True}
    events, error = collect(lambda: bedrock.message_events(target(fake, model, **cloud), body, headers or {},
                                                           "beta=true"))
    assert error is None, error
    return events


@pytest.mark.parametrize("model", [CLAUDE, PROFILE, ARN])
def test_the_gateway_sends_what_boto3_sends(fake_bedrock, model):  # noqa: F811
    betas = ["interleaved-thinking-2025-05-14", "context-1m-2025-08-07"]
    reference = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 50, "messages": MESSAGES,
                 "anthropic_beta": betas}
    assert boto3_stream(fake_bedrock, model, reference)[-1] == "message_stop"
    sent = fake_bedrock.requests[-1]
    events = gateway_stream(fake_bedrock, model, {"anthropic-beta": ",".join(betas)})
    ours = fake_bedrock.requests[-1]
    assert [e["type"] for e in events][-1] == "message_stop"
    assert (ours.method, ours.raw_path, ours.query) == (sent.method, sent.raw_path, "")
    assert ours.json == sent.json == reference
    assert ours.signed == sent.signed == BOTO_SIGNED
    assert (ours.auth, ours.problem, sent.auth, sent.problem) == ("sigv4", None, "sigv4", None)
    assert ours.headers["content-type"] == ours.headers["x-amzn-bedrock-accept"] == "application/json"


def test_the_gateway_sends_what_the_anthropic_sdk_s_bedrock_client_sends(fake_bedrock):  # noqa: F811
    client = anthropic.AnthropicBedrock(aws_access_key=ACCESS_KEY, aws_secret_key=SECRET_KEY, aws_region=REGION,
                                        base_url=fake_bedrock.url, max_retries=0)
    with client.beta.messages.stream(model=CLAUDE, max_tokens=50, messages=MESSAGES,
                                     betas=["context-1m-2025-08-07"],
                                     extra_body={"anthropic_version": "bedrock-2023-05-31"}) as stream:
        assert stream.get_final_message().content[0].text == "Echo: one two"  # it reads the fake's frames
    sent = fake_bedrock.requests[-1]
    gateway_stream(fake_bedrock, CLAUDE, {"anthropic-beta": "context-1m-2025-08-07"})
    ours = fake_bedrock.requests[-1]
    assert ours.path == sent.path == f"/model/{CLAUDE}/invoke-with-response-stream"  # the SDK leaves ':' as it is
    assert ours.json == sent.json == {"max_tokens": 50, "messages": MESSAGES, "anthropic_version": "bedrock-2023-05-31",
                                      "anthropic_beta": ["context-1m-2025-08-07"]}
    # the SDK signs every header it sends, its own too; it says `accept` where boto3 says x-amzn-bedrock-accept
    assert set(ours.signed) - {"x-amzn-bedrock-accept"} < set(sent.signed)
    assert sent.problem is None and ours.problem is None


def test_a_session_token_is_sent_and_signed(fake_bedrock):  # noqa: F811
    fake_bedrock.configure(credentials={"ASIAFAKETEMPORARY001": ("temporary-secret", "the-session-token")})
    cloud = {"aws_access_key_id": "ASIAFAKETEMPORARY001", "aws_secret_access_key": "temporary-secret",
             "aws_session_token": "the-session-token"}
    gateway_stream(fake_bedrock, CLAUDE, **cloud)
    ours = fake_bedrock.requests[-1]
    boto3_stream(fake_bedrock, CLAUDE, {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 5,
                                        "messages": MESSAGES}, aws_access_key_id="ASIAFAKETEMPORARY001",
                 aws_secret_access_key="temporary-secret", aws_session_token="the-session-token")
    assert ours.problem is None and ours.headers["x-amz-security-token"] == "the-session-token"
    assert ours.signed == fake_bedrock.requests[-1].signed == sorted([*BOTO_SIGNED, "x-amz-security-token"])


def test_a_wrong_secret_does_not_verify_and_is_never_shown(fake_bedrock):  # noqa: F811
    body = {"max_tokens": 5, "messages": MESSAGES}
    _events, error = collect(lambda: bedrock.message_events(
        target(fake_bedrock, aws_secret_access_key="not-the-secret-at-all"), body, {}, ""))
    assert fake_bedrock.requests[-1].problem == "the signature does not match"
    assert isinstance(error, UpstreamError) and (error.kind, error.status) == ("unavailable", 403)
    assert error.message.startswith("InvalidSignatureException: The request signature we calculated")
    assert "not-the-secret-at-all" not in str(error)


def test_a_bedrock_api_key_is_a_bearer_token_and_nothing_is_signed(fake_bedrock):  # noqa: F811
    fake_bedrock.configure(api_key="ABSKbedrock-api-key-0001")
    events, error = collect(lambda: bedrock.message_events(
        target(fake_bedrock, api_key="ABSKbedrock-api-key-0001", aws_access_key_id="", aws_secret_access_key=""),
        {"max_tokens": 5, "messages": MESSAGES}, {}, ""))
    assert error is None and events[-1]["type"] == "message_stop"
    sent = fake_bedrock.requests[-1]
    assert (sent.auth, sent.problem) == ("bearer", None)
    assert sent.headers["authorization"] == "Bearer ABSKbedrock-api-key-0001"
    assert not [name for name in sent.headers if name.startswith("x-amz-")]


def test_without_keys_aws_s_credential_chain_signs(fake_bedrock, monkeypatch):  # noqa: F811
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFROMTHEENVIRONMEN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-from-the-environment")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    fake_bedrock.configure(credentials={"AKIAFROMTHEENVIRONMEN": ("secret-from-the-environment", None)})
    gateway_stream(fake_bedrock, CLAUDE, aws_access_key_id="", aws_secret_access_key="")
    assert fake_bedrock.requests[-1].problem is None
    assert fake_bedrock.requests[-1].headers["authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=AKIAFROMTHEENVIRONMEN/")


def test_credentials_due_for_a_refresh_are_refreshed_off_the_event_loop(fake_bedrock):  # noqa: F811
    refreshed_in: list[str] = []

    def refresh():
        refreshed_in.append(threading.current_thread().name)
        expiry = datetime.now(timezone.utc) + timedelta(hours=1)
        return {"access_key": "ASIAREFRESHED0000001", "secret_key": "refreshed-secret", "token": "refreshed-token",
                "expiry_time": expiry.isoformat()}

    expired = (datetime.now(timezone.utc) - timedelta(minutes=1)).isoformat()
    credentials = RefreshableCredentials.create_from_metadata(
        {"access_key": "ASIAEXPIRED000000001", "secret_key": "old", "token": "old", "expiry_time": expired},
        refresh, "test")
    aws_auth._chain.credentials, aws_auth._chain.resolved_at = credentials, 0.0
    fake_bedrock.configure(credentials={"ASIAREFRESHED0000001": ("refreshed-secret", "refreshed-token")})
    cloud = {"aws_access_key_id": "", "aws_secret_access_key": ""}
    assert aws_auth.needs_io(target(fake_bedrock, **cloud).server.cloud)
    gateway_stream(fake_bedrock, CLAUDE, **cloud)
    assert fake_bedrock.requests[-1].problem is None
    assert refreshed_in and refreshed_in[0] != threading.main_thread().name  # asyncio.to_thread's worker
    assert not aws_auth.needs_io(target(fake_bedrock, **cloud).server.cloud)  # fresh now: no thread next time


def test_without_any_credentials_the_server_is_unavailable_and_nothing_is_sent(fake_bedrock, monkeypatch):  # noqa: F811
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    _events, error = collect(lambda: bedrock.message_events(
        target(fake_bedrock, aws_access_key_id="", aws_secret_access_key=""), {"max_tokens": 5, "messages": MESSAGES},
        {}, ""))
    assert isinstance(error, UpstreamError) and (error.kind, error.status) == ("unavailable", 401)
    assert error.message.startswith("No AWS credentials for server 'aws'")
    assert not fake_bedrock.requests


def test_the_cloud_secrets_are_redacted_from_the_logs(db):
    from gateway.registry.snapshot import registry
    from gateway.telemetry.redact import configured_secrets, redact
    from tests.factories import ModelFactory, ModelServerFactory

    server = ModelServerFactory(name="aws", kind="bedrock", region=REGION, aws_access_key_id=ACCESS_KEY,
                                aws_secret_access_key=SECRET_KEY, aws_session_token="a-session-token-value-01")
    ModelFactory(server=server, name=CLAUDE)
    assert set(registry().server_keys) == {SECRET_KEY, "a-session-token-value-01"}
    assert redact(f"signed with {SECRET_KEY}", configured_secrets()) == "signed with [redacted]"
