"""Every reply the /v1 surfaces give holds the providers' own published schemas
(tests/compat/reply_schemas/: OpenAI's OpenAPI document, the shapes Anthropic's SDKs were generated
from): chat completions whole and each chunk, Messages whole, each stream event and the errors,
Responses whole and each stream event, the embeddings list. Clients generated from those documents
in other languages reject a reply that lacks a required field, so each kind of model server is
driven through every surface, in its own format and translated.

A kind of model server joins in one place, `SERVER_KINDS`: a function that sets up, in the test's
`world`, a server of that kind in front of its fake (`fixture(name)` hands it any pytest fixture it
needs, such as a fake of its own), and names its chat model (and its embedding model, when the kind
serves embeddings), the fake's knobs (`configure`: the reference upstream's names for a tool call's
arguments and a cut midway) and how to make the fake refuse a call as its service does. Every test
below then runs for it.

Bodies are read raw (httpx, not an SDK) so that nothing an SDK fills in hides a missing field. The
spec's own 401 and 429 bodies are not the providers' and are not checked here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import httpx
import pytest

from tests.compat.reply_schemas import check, check_events, sse, sse_json
from tests.compat.reply_schemas.kinds import fake_azure, fake_bedrock, fake_google, key_file  # noqa: F401 — fixtures
from tests.factories import ModelFactory, ModelServerFactory
from tests.gateway.upstream.azure.fake_azure import API_KEY as AZURE_KEY
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, CLAUDE, REGION, SECRET_KEY
from tests.gateway.upstream.google import fake as google
from tests.servers import web_process

NOVA = "amazon.nova-lite-v1:0"
TITAN = "amazon.titan-embed-text-v2:0"
HELLO = [{"role": "user", "content": "one two three"}]
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ARGUMENTS = {"city": "Paris"}


@dataclass(frozen=True)
class Served:
    chat: str  # the model id a client names for chat
    fake: Any  # what answers for the kind: `configure(tool_arguments=..., cut_after_tokens=...)`
    fail: Callable[[], None]  # make the fake refuse the next calls with a 400 of its service's own
    embeddings: str | None = None  # the embedding model's id, when the kind serves embeddings


def _reference_failing(upstream) -> Callable[[], None]:
    return lambda: upstream.configure(fail_status=400)


def _openai_compatible(world, fixture) -> Served:
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    return Served("oa/echo-1", world.upstream, _reference_failing(world.upstream), embeddings="oa/embed-1")


def _anthropic(world, fixture) -> Served:
    return Served("an/claude-echo", world.upstream, _reference_failing(world.upstream))


def _bedrock(world, fake, chat: str) -> Served:
    """A Bedrock server signing with the fake's access key; Titan serves its embeddings."""
    aws = ModelServerFactory(name="aws", kind="bedrock", base_url=fake.url, region=REGION, is_remote=True,
                             aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, read_timeout=5.0)
    ModelFactory(server=aws, name=chat)
    ModelFactory(server=aws, name=TITAN, supports_chat=False, supports_embeddings=True)
    return Served(f"aws/{chat}", fake, lambda: fake.configure(fail_error="ValidationException", fail_status=400),
                  embeddings=f"aws/{TITAN}")


def _bedrock_claude(world, fixture) -> Served:
    return _bedrock(world, fixture("fake_bedrock"), CLAUDE)  # InvokeModel, Anthropic's Messages inside


def _bedrock_converse(world, fixture) -> Served:
    return _bedrock(world, fixture("fake_bedrock"), NOVA)  # ConverseStream (gateway/formats/converse/)


def _azure(world, fixture) -> Served:
    """An Azure OpenAI resource on its dated API with an API key; its replies are the reference
    upstream's, at Azure's addresses, each stream opening with Azure's prompt filter chunk."""
    resource = fixture("fake_azure")
    az = ModelServerFactory(name="az", kind="azure", base_url=resource.url, api_version="2024-10-21", is_remote=True,
                            api_key=AZURE_KEY, read_timeout=5.0)
    ModelFactory(server=az, name="gpt-4o-deployment")
    ModelFactory(server=az, name="embed-deployment", supports_chat=False, supports_embeddings=True)
    return Served("az/gpt-4o-deployment", resource.upstream, _reference_failing(resource.upstream),
                  embeddings="az/embed-deployment")


def _vertex_claude(world, fixture) -> Served:
    """A Claude model on Vertex AI (streamRawPredict, Anthropic's Messages), its token from a service account's
    key the fake's token endpoint verifies."""
    fake = fixture("fake_google")
    gcp = ModelServerFactory(name="gcp", kind="vertex", base_url=fake.url, region=google.REGION, is_remote=True,
                             gcp_project=google.PROJECT, gcp_credentials_file=fixture("key_file"), read_timeout=5.0)
    ModelFactory(server=gcp, name=google.CLAUDE)
    return Served(f"gcp/{google.CLAUDE}", fake, lambda: fake.configure(fail_status="INVALID_ARGUMENT", fail_code=400))


def _google_gemini(world, fixture, kind: str) -> Served:
    """A Gemini model on the Gemini API (its key) or on Vertex AI (a service account's token), through
    streamGenerateContent (gateway/formats/gemini/); Google's embedding model beside it."""
    fake = fixture("fake_google")
    if kind == "gemini":
        server = ModelServerFactory(name="gem", kind="gemini", base_url=fake.url, api_key=google.API_KEY,
                                    is_remote=True, read_timeout=5.0)
        embedder = "gemini-embedding-001"
    else:
        server = ModelServerFactory(name="gcpg", kind="vertex", base_url=fake.url, region=google.REGION,
                                    is_remote=True, gcp_project=google.PROJECT,
                                    gcp_credentials_file=fixture("key_file"), read_timeout=5.0)
        embedder = "text-embedding-005"
    ModelFactory(server=server, name=google.GEMINI)
    ModelFactory(server=server, name=embedder, supports_chat=False, supports_embeddings=True)
    return Served(f"{server.name}/{google.GEMINI}", fake,
                  lambda: fake.configure(fail_status="INVALID_ARGUMENT", fail_code=400),
                  embeddings=f"{server.name}/{embedder}")


def _gemini(world, fixture) -> Served:
    return _google_gemini(world, fixture, "gemini")


def _vertex_gemini(world, fixture) -> Served:
    return _google_gemini(world, fixture, "vertex")


# The kinds of model server, each set up in the compat `world` (tests/compat/conftest.py): the
# servers `oa` and `an` stand in front of the reference upstream (tests/upstream); the cloud kinds in
# front of their own fakes (tests/compat/reply_schemas/kinds.py).
SERVER_KINDS: dict[str, Callable[..., Served]] = {
    "openai": _openai_compatible,
    "anthropic": _anthropic,
    "bedrock-claude": _bedrock_claude,
    "bedrock-converse": _bedrock_converse,
    "azure": _azure,
    "vertex-claude": _vertex_claude,
    "gemini": _gemini,
    "vertex-gemini": _vertex_gemini,
}


@pytest.fixture(params=sorted(SERVER_KINDS))
def served(request, world) -> Served:
    kind = SERVER_KINDS[request.param](world, request.getfixturevalue)
    kind.fake.configure(tool_arguments=ARGUMENTS)
    return kind


@pytest.fixture(scope="module")
def tools_gateway(django_db_setup, django_db_blocker):
    """A gateway with RESPONSES_TOOLS on (a setting of the gateway's process), for the Responses
    tests: function calls are among the replies they give."""
    with django_db_blocker.unblock():
        with web_process(REGISTRY_TTL_SECONDS="0", RESPONSES_TOOLS="true") as base:
            yield base


def post(world, path: str, body: dict, base: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {world.key}"} if path != "/v1/messages" else {"x-api-key": world.key}
    return httpx.post(f"{base or world.base}{path}", json=body, headers=headers, timeout=30)


def chat_tools() -> list[dict]:
    return [{"type": "function", "function": {"name": "get_weather", "parameters": PARAMETERS}}]


# ------------------------------------------------------------------------------------ chat completions

def test_a_chat_completion_holds_the_schema(world, served):
    text = post(world, "/v1/chat/completions", {"model": served.chat, "messages": HELLO})
    call = post(world, "/v1/chat/completions", {"model": served.chat, "messages": HELLO, "tools": chat_tools()})
    for response in (text, call):
        assert response.status_code == 200, response.text
        check("openai", "CreateChatCompletionResponse", response.json())
    assert call.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tool_call"])
def test_each_chat_chunk_holds_the_schema(world, served, tools):
    body = {"model": served.chat, "messages": HELLO, "stream": True, "stream_options": {"include_usage": True}}
    response = post(world, "/v1/chat/completions", {**body, "tools": chat_tools()} if tools else body)
    assert response.status_code == 200, response.text
    items = [data for _, data in sse(response.text)]
    assert items[-1] == "[DONE]"
    chunks = [json.loads(data) for data in items[:-1]]
    for chunk in chunks:
        check("openai", "CreateChatCompletionStreamResponse", chunk)
    assert chunks[-1]["usage"]["total_tokens"] > 0


def test_a_chat_reply_cut_midway_holds_the_schema_whole_and_streamed(world, served):
    served.fake.configure(cut_after_tokens=2)
    whole = post(world, "/v1/chat/completions", {"model": served.chat, "messages": HELLO})
    assert whole.status_code == 502, whole.text
    check("openai", "ErrorResponse", whole.json())
    check("openai", "CreateChatCompletionResponse", whole.json()["partial"])
    streamed = post(world, "/v1/chat/completions", {"model": served.chat, "messages": HELLO, "stream": True})
    items = [data for _, data in sse(streamed.text)]
    assert items[-1] == "[DONE]"
    for data in items[:-2]:
        check("openai", "CreateChatCompletionStreamResponse", json.loads(data))
    check("openai", "ErrorResponse", json.loads(items[-2]))


def test_chat_refusals_hold_the_error_schema(world, served):
    for body in ({"model": served.chat, "messages": "not a list"}, {"model": "oa/no-such-model", "messages": HELLO}):
        response = post(world, "/v1/chat/completions", body)
        assert response.status_code in (400, 404), response.text
        check("openai", "ErrorResponse", response.json())


# ------------------------------------------------------------------------------------ messages

def messages_body(served: Served, **extra) -> dict:
    return {"model": served.chat, "max_tokens": 50, "messages": HELLO, **extra}


def anthropic_tools() -> list[dict]:
    return [{"name": "get_weather", "input_schema": PARAMETERS}]


def test_a_message_holds_the_schema(world, served):
    text = post(world, "/v1/messages", messages_body(served))
    call = post(world, "/v1/messages", messages_body(served, tools=anthropic_tools()))
    cut = post(world, "/v1/messages", messages_body(served, max_tokens=2))
    for response in (text, call, cut):
        assert response.status_code == 200, response.text
        check("anthropic", "Message", response.json())
    assert [block["type"] for block in call.json()["content"]] == ["tool_use"]
    assert cut.json()["stop_reason"] == "max_tokens"


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tool_use"])
def test_each_message_stream_event_holds_the_schema(world, served, tools):
    body = messages_body(served, stream=True, **({"tools": anthropic_tools()} if tools else {}))
    response = post(world, "/v1/messages", body)
    assert response.status_code == 200, response.text
    events = sse_json(response.text)
    check_events("anthropic", events)
    assert [events[0]["type"], events[-1]["type"]] == ["message_start", "message_stop"]


def test_a_message_cut_midway_holds_the_schema_whole_and_streamed(world, served):
    served.fake.configure(cut_after_tokens=2)
    whole = post(world, "/v1/messages", messages_body(served))
    assert whole.status_code == 502, whole.text
    check("anthropic", "ErrorResponse", whole.json())
    check("anthropic", "Message", whole.json()["partial"])
    streamed = post(world, "/v1/messages", messages_body(served, stream=True))
    events = sse_json(streamed.text)
    check_events("anthropic", events)
    assert events[-1]["type"] == "error"


def test_messages_refusals_hold_the_error_schema(world, served):
    cases = [
        (messages_body(served, messages="not a list"), 400),
        ({"model": "oa/no-such-model", "max_tokens": 50, "messages": HELLO}, 404),
        # uncarried by the chat form an OpenAI-kind server takes, refused by name (a kind whose wire is
        # Anthropic's takes `n` through as it came: the server answers for it, as above)
        ({"model": "oa/echo-1", "max_tokens": 50, "messages": HELLO, "n": 2}, 400),
    ]
    for body, status in cases:
        response = post(world, "/v1/messages", body)
        assert response.status_code == status, response.text
        check("anthropic", "ErrorResponse", response.json())
        assert response.json()["request_id"] == response.headers["X-Request-Id"]


def test_a_model_server_failing_holds_the_messages_error_schema(world, served):
    served.fail()
    world.upstream.configure(fail_status=400)  # the default model too, which a refusal on /v1 falls through to
    response = post(world, "/v1/messages", messages_body(served))
    assert response.status_code == 400, response.text
    check("anthropic", "ErrorResponse", response.json())


# ------------------------------------------------------------------------------------ responses

FUNCTION = {"type": "function", "name": "get_weather", "strict": False, "parameters": PARAMETERS}


@pytest.mark.parametrize("options", [{}, {"tools": [FUNCTION]}, {"max_output_tokens": 2}],
                         ids=["text", "function_call", "incomplete"])
def test_a_response_holds_the_schema(world, served, tools_gateway, options):
    response = post(world, "/v1/responses", {"model": served.chat, "input": "one two three", **options},
                    base=tools_gateway)
    assert response.status_code == 200, response.text
    check("openai", "Response", response.json())
    kinds = [item["type"] for item in response.json()["output"]]
    assert kinds == (["function_call"] if options.get("tools") else ["message"])


@pytest.mark.parametrize("options", [{}, {"tools": [FUNCTION]}, {"max_output_tokens": 2}],
                         ids=["text", "function_call", "incomplete"])
def test_each_response_stream_event_holds_the_schema(world, served, tools_gateway, options):
    body = {"model": served.chat, "input": "one two three", "stream": True, **options}
    response = post(world, "/v1/responses", body, base=tools_gateway)
    assert response.status_code == 200, response.text
    events = sse_json(response.text)
    check_events("openai", events)
    last = {"tools": "response.completed", "max_output_tokens": "response.incomplete"}
    assert events[-1]["type"] == next((last[k] for k in options), "response.completed")


def test_a_response_cut_midway_holds_the_schema_whole_and_streamed(world, served, tools_gateway):
    served.fake.configure(cut_after_tokens=2)
    whole = post(world, "/v1/responses", {"model": served.chat, "input": "one two three"}, base=tools_gateway)
    assert whole.status_code == 502, whole.text
    check("openai", "ErrorResponse", whole.json())
    check("openai", "Response", whole.json()["partial"])
    streamed = post(world, "/v1/responses", {"model": served.chat, "input": "one two three", "stream": True},
                    base=tools_gateway)
    events = sse_json(streamed.text)
    check_events("openai", events)
    assert events[-1]["type"] == "response.failed"


def test_responses_refusals_hold_the_error_schema(world, served):
    no_input, tools_off = {"model": served.chat}, {"model": served.chat, "input": "hi", "tools": [FUNCTION]}
    for body, status in ((no_input, 400), (tools_off, 501)):
        response = post(world, "/v1/responses", body)
        assert response.status_code == status, response.text
        check("openai", "ErrorResponse", response.json())


# ------------------------------------------------------------------------------------ embeddings

def test_an_embeddings_list_holds_the_schema(world, served):
    if served.embeddings is None:
        response = post(world, "/v1/embeddings", {"model": served.chat, "input": "one two"})
        assert response.status_code >= 400, response.text  # a kind without embeddings refuses, in the shape
        check("openai", "ErrorResponse", response.json())
        return
    for text in ("one two", ["one", "two three"]):
        response = post(world, "/v1/embeddings", {"model": served.embeddings, "input": text,
                                                  "encoding_format": "float"})
        assert response.status_code == 200, response.text
        check("openai", "CreateEmbeddingResponse", response.json())
    refused = post(world, "/v1/embeddings", {"model": served.embeddings, "input": "x", "dimensions": 8})
    assert refused.status_code == 400
    check("openai", "ErrorResponse", refused.json())
