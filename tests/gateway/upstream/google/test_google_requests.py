"""What the gateway sends Google, against Google's and Anthropic's own SDKs sent at the same fake: the same
method, path, query and body, the credentials where they belong (the Gemini API's key in `x-goog-api-key`,
never in the URL; Vertex AI's access token as a bearer token, from a service account's key whose JWT
assertion the fake's token endpoint verifies), and Claude's betas as the `anthropic-beta` header."""

from __future__ import annotations

import time

import anthropic
import pytest
from google import genai
from google.genai import types
from google.oauth2 import service_account

from gateway.upstream.providers.google import gemini, vertex
from tests.gateway.upstream.google.fake import API_KEY, CLAUDE, GEMINI, PROJECT, REGION
from tests.gateway.upstream.google.support import (  # noqa: F401 — fixtures
    collect,
    fake_google,
    gemini_target,
    key_file,
    vertex_target,
)

MESSAGES = [{"role": "user", "content": "one two"}]
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
CONFIG = types.GenerateContentConfig(temperature=0.2, max_output_tokens=40, system_instruction="Be brief.")


def test_claude_on_vertex_gets_what_anthropic_vertex_sends(fake_google, key_file):  # noqa: F811
    token = "ya29.a-token-for-the-sdk"
    fake_google.state.tokens[token] = time.time() + 3600
    client = anthropic.AnthropicVertex(region=REGION, project_id=PROJECT, base_url=f"{fake_google.url}/v1",
                                       access_token=token, max_retries=0)
    with client.beta.messages.stream(model=CLAUDE, max_tokens=50, messages=MESSAGES,
                                     betas=["context-1m-2025-08-07", "interleaved-thinking-2025-05-14"],
                                     extra_body={"anthropic_version": "vertex-2023-10-16"}) as stream:
        assert stream.get_final_message().content[0].text == "Echo: one two"  # it reads the fake's events
    sent = fake_google.calls()[-1]
    body = {"model": "gcp/x", "max_tokens": 50, "messages": MESSAGES, "stream": True}
    events, error = collect(lambda: vertex.message_events(
        vertex_target(fake_google, key_file), body,
        {"anthropic-beta": "context-1m-2025-08-07,interleaved-thinking-2025-05-14"}, "beta=true"))
    assert error is None and events[-1]["type"] == "message_stop"
    ours = fake_google.calls()[-1]
    assert ours.raw_path == sent.raw_path == (f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/anthropic/"
                                              f"models/{CLAUDE}:streamRawPredict")
    assert (ours.method, ours.query) == (sent.method, sent.query) == ("POST", "")
    assert ours.json == sent.json == {"max_tokens": 50, "messages": MESSAGES, "stream": True,
                                      "anthropic_version": "vertex-2023-10-16"}
    assert ours.headers["anthropic-beta"] == sent.headers["anthropic-beta"] == (
        "context-1m-2025-08-07,interleaved-thinking-2025-05-14")
    assert ours.headers["content-type"] == sent.headers["content-type"] == "application/json"
    assert ours.headers["authorization"].startswith("Bearer ya29.fake-")  # the service account's, from the fake
    assert (ours.problem, sent.problem) == (None, None)


def test_a_gemini_api_model_gets_what_google_genai_sends_with_the_key_in_its_header(fake_google):  # noqa: F811
    client = genai.Client(api_key=API_KEY, http_options={"base_url": fake_google.url, "api_version": "v1beta"})
    text = "".join(chunk.text or "" for chunk in client.models.generate_content_stream(
        model=GEMINI, contents="one two", config=CONFIG))
    assert text == "Echo: one two"
    sent = fake_google.calls()[-1]
    events, error = collect(lambda: gemini.gemini_events(gemini_target(fake_google), sent.json))
    assert error is None and events[-1]["candidates"][0]["finishReason"] == "STOP"
    ours = fake_google.calls()[-1]
    assert ours.raw_path == sent.raw_path == f"/v1beta/models/{GEMINI}:streamGenerateContent"
    assert ours.query == sent.query == "alt=sse"
    assert ours.json == sent.json
    assert ours.headers["x-goog-api-key"] == sent.headers["x-goog-api-key"] == API_KEY
    assert "authorization" not in ours.headers and (ours.problem, sent.problem) == (None, None)


def test_a_gemini_model_on_vertex_gets_what_google_genai_sends(fake_google, key_file):  # noqa: F811
    credentials = service_account.Credentials.from_service_account_file(key_file, scopes=[SCOPE])
    client = genai.Client(vertexai=True, project=PROJECT, location=REGION, credentials=credentials,
                          http_options={"base_url": fake_google.url, "api_version": "v1"})
    text = "".join(chunk.text or "" for chunk in client.models.generate_content_stream(
        model=GEMINI, contents="one two", config=CONFIG))
    assert text == "Echo: one two"
    sent = fake_google.calls()[-1]
    events, error = collect(lambda: vertex.gemini_events(vertex_target(fake_google, key_file, GEMINI), sent.json))
    assert error is None and [e["usageMetadata"]["candidatesTokenCount"] for e in events][-1] == 3
    ours = fake_google.calls()[-1]
    assert ours.raw_path == sent.raw_path == (f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/google/"
                                              f"models/{GEMINI}:streamGenerateContent")
    assert ours.query == sent.query == "alt=sse"
    assert ours.json == sent.json
    assert sent.headers["authorization"].startswith("Bearer ya29.fake-")
    assert ours.headers["authorization"].startswith("Bearer ya29.fake-")
    assert (ours.problem, sent.problem) == (None, None)
    # both asked the fake's token endpoint with the service account's signed assertion, which verified
    assert [r.problem for r in fake_google.token_requests()] == [None, None]


@pytest.mark.parametrize(("model", "publisher", "wire"), [
    (CLAUDE, "", "anthropic"), ("claude-opus-4-1@20250805", "", "anthropic"), (GEMINI, "", "gemini"),
    ("my-tuned-claude", "anthropic", "anthropic"), ("llama-4-maverick-17b-128e-instruct-maas", "meta", "gemini")])
def test_a_vertex_model_s_wire_format_is_its_publisher_s(fake_google, model, publisher, wire):  # noqa: F811
    assert vertex.wire(vertex_target(fake_google, "", model, publisher=publisher)) == wire
    assert gemini.wire(gemini_target(fake_google, model)) == "gemini"
