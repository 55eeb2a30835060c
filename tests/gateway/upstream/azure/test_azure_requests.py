"""The gateway's requests to Azure OpenAI are the requests Azure's own clients make: `openai.AzureOpenAI`
for a dated API version, `openai.OpenAI(base_url=".../openai/v1/")` for the v1 API, each with an API key
and with Microsoft Entra ID (`azure_ad_token_provider`, or the token provider as the key). For the same
input, the path, the query, the credential header and the body are theirs (the body but for the stream
fields the gateway always sets, and the embeddings' `encoding_format`, floats either way); the reply parses
as theirs does."""

from __future__ import annotations

import asyncio
import email.parser
import io
import json
import wave
from urllib.parse import parse_qs

import pytest

from gateway.upstream import providers
from gateway.upstream.providers import azure as azure_provider
from tests.gateway.upstream.azure.conftest import WAYS, azure_server, oracle, target_of
from tests.gateway.upstream.azure.fake_azure import API_KEY

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello azure"}]
STREAM_FIELDS = ("stream", "stream_options")


def credential_of(request) -> tuple[str, str]:
    """(header, scheme or the key itself) of a request's credential."""
    if "api-key" in request.headers:
        return "api-key", request.headers["api-key"]
    scheme, _, value = request.headers["authorization"].partition(" ")
    return "authorization", scheme if value != API_KEY else f"{scheme} {API_KEY}"


def assert_same_request(ours, theirs, tenant, *, ignored=STREAM_FIELDS) -> None:
    assert (ours.method, ours.path, parse_qs(ours.query)) == (theirs.method, theirs.path, parse_qs(theirs.query))
    assert credential_of(ours) == credential_of(theirs)
    assert ours.headers["content-type"].split(";")[0] == theirs.headers["content-type"].split(";")[0]
    if credential_of(ours)[1] == "Bearer":  # an Entra ID token, each one the tenant issued
        assert ours.headers["authorization"].removeprefix("Bearer ") in tenant.issued
        assert theirs.headers["authorization"].removeprefix("Bearer ") in tenant.issued
    if theirs.json is not None:
        assert without(ours.json, ignored) == without(theirs.json, ignored)


def without(body: dict, names) -> dict:
    return {k: v for k, v in body.items() if k not in names}


def collect(stream) -> list[dict]:
    async def run():
        return [chunk async for chunk in stream]

    return asyncio.run(run())


@pytest.mark.parametrize(("version", "auth"), WAYS)
@pytest.mark.parametrize("client_streams", [False, True])
def test_chat_goes_where_and_as_azures_own_client_sends_it(azure, tenant, version, auth, client_streams):
    client = oracle(azure, tenant, version, auth)
    asked = {"model": "gpt-4o-deployment", "messages": MESSAGES, "temperature": 0.2, "max_tokens": 50,
             "user": "u-1", "metadata": {"team": "a"}}
    if client_streams:
        chunks = list(client.chat.completions.create(**asked, stream=True, stream_options={"include_usage": True}))
        theirs_text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        theirs_text = client.chat.completions.create(**asked).choices[0].message.content
    theirs = azure.fake.requests[-1]
    target = target_of(azure_server(azure, tenant, version, auth), "gpt-4o-deployment")
    ours_chunks = collect(providers.chat_stream(target, without(asked, ("model",))))
    ours = azure.fake.requests[-1]

    assert_same_request(ours, theirs, tenant)
    assert ours.json["stream"] is True and ours.json["stream_options"] == {"include_usage": True}
    if client_streams:
        assert ours.json == theirs.json  # to the letter: the SDK streamed with usage too
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in ours_chunks if c["choices"]) == \
        theirs_text == "Echo: hello azure"
    assert ours_chunks[-1]["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    assert all(c["choices"] or c.get("usage") for c in ours_chunks)  # Azure's prompt-filter chunk: not a reply


@pytest.mark.parametrize(("version", "auth"), WAYS)
def test_embeddings_go_where_and_as_azures_own_client_sends_them(azure, tenant, version, auth):
    client = oracle(azure, tenant, version, auth)
    theirs_reply = client.embeddings.create(model="embed-deployment", input=["one text", "another"],
                                            encoding_format="float")
    theirs = azure.fake.requests[-1]
    target = target_of(azure_server(azure, tenant, version, auth), "embed-deployment")
    ours_reply = asyncio.run(providers.embeddings(target, ["one text", "another"]))
    ours = azure.fake.requests[-1]

    assert_same_request(ours, theirs, tenant, ignored=("encoding_format",))
    assert ours.json == {"model": "embed-deployment", "input": ["one text", "another"]}
    assert [d["embedding"] for d in ours_reply["data"]] == [d.embedding for d in theirs_reply.data]


def a_second_of_silence() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\0\0" * 8000)
    return out.getvalue()


def form_of(request) -> dict[str, bytes]:
    """The fields of a multipart body, by name."""
    head = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
    message = email.parser.BytesParser().parsebytes(head + request.body)
    return {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in message.get_payload()}


@pytest.mark.parametrize(("version", "auth"), WAYS)
def test_audio_goes_where_and_as_azures_own_client_sends_it(azure, tenant, version, auth):
    client = oracle(azure, tenant, version, auth)
    audio = a_second_of_silence()
    theirs_text = client.audio.transcriptions.create(model="whisper-deployment", file=("a.wav", audio, "audio/wav"),
                                                     language="en").text
    theirs = azure.fake.requests[-1]
    target = target_of(azure_server(azure, tenant, version, auth), "whisper-deployment")
    response = asyncio.run(providers.forward(target, "/audio/transcriptions",
                                             data={"model": "whisper-deployment", "language": "en"},
                                             files={"file": ("a.wav", audio, "audio/wav")}))
    ours = azure.fake.requests[-1]

    assert_same_request(ours, theirs, tenant)
    assert form_of(ours) == form_of(theirs) == {"model": b"whisper-deployment", "language": b"en", "file": audio}
    assert response.status_code == 200 and json.loads(response.content)["text"] == theirs_text

    client.audio.speech.create(model="whisper-deployment", voice="alloy", input="say this")
    theirs = azure.fake.requests[-1]
    response = asyncio.run(providers.forward(target, "/audio/speech", json={
        "model": "whisper-deployment", "voice": "alloy", "input": "say this"}))
    assert_same_request(azure.fake.requests[-1], theirs, tenant)
    assert response.status_code == 200 and response.content


@pytest.mark.parametrize(("base_url", "version", "url"), [
    ("https://r.openai.azure.com", "2024-10-21",
     "https://r.openai.azure.com/openai/deployments/gpt-4o-deployment/embeddings?api-version=2024-10-21"),
    ("https://r.openai.azure.com/openai/", "2025-04-01-preview",
     "https://r.openai.azure.com/openai/deployments/gpt-4o-deployment/embeddings?api-version=2025-04-01-preview"),
    ("https://r.openai.azure.com/openai/v1/", "v1", "https://r.openai.azure.com/openai/v1/embeddings"),
    ("https://r.cognitiveservices.azure.com", "v1", "https://r.cognitiveservices.azure.com/openai/v1/embeddings"),
])
def test_the_resource_is_its_address_also_when_written_with_azures_own_paths(azure, tenant, base_url, version, url):
    row = azure_server(azure, tenant, version, "key", base_url=base_url)
    assert asyncio.run(azure_provider.endpoint(target_of(row, "gpt-4o-deployment"), "/embeddings"))[0] == url
