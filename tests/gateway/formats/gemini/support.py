"""For the Gemini translation tests, Google's own SDK as the oracle of the wire format: every request
built is read by google-genai's types (camelCase, unknown fields refused) and sent by its client,
Gemini API and Vertex AI, through an httpx MockTransport; the body it sends must be the body the
gateway builds. Every Gemini chunk a test feeds is read by the SDK's GenerateContentResponse, and
every chat chunk that comes out by the OpenAI SDK's ChatCompletionChunk."""

import json

import httpx
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials
from openai.types.chat import ChatCompletionChunk
from pydantic import alias_generators

from gateway.formats.gemini import GeminiToChatStream, chat_to_gemini_request
from gateway.upstream.replies import chunk_problem
from tests.gateway.formats.anthropic_support import valid_chat_request

PROJECT, LOCATION = "proj-1", "us-central1"
REQUEST_FIELDS = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings",
                  "cachedContent", "labels", "serviceTier"}


def google_client(handler, *, vertex=False):
    """google-genai's client over `handler` (an httpx MockTransport handler): nothing leaves the process."""
    options = types.HttpOptions(base_url="http://google.test", httpx_client=httpx.Client(
        transport=httpx.MockTransport(handler)))
    if vertex:
        return genai.Client(vertexai=True, project=PROJECT, location=LOCATION, credentials=Credentials(token="t"),
                            http_options=options)
    return genai.Client(api_key="k", http_options=options)


def parsed(model_type, value):
    """`value` (the wire's JSON) read by one of google-genai's types, as the SDK reads a reply."""
    return model_type.model_validate_json(json.dumps(value))


def sdk_body(req, *, model="gemini-2.5-flash", vertex=False):
    """The generateContent body google-genai sends for what `req` holds, each field read by the SDK's
    own type first."""
    assert set(req) <= REQUEST_FIELDS, set(req) - REQUEST_FIELDS
    config = {}
    if "generationConfig" in req:
        config.update(parsed(types.GenerationConfig, req["generationConfig"]).model_dump(exclude_none=True))
    if "systemInstruction" in req:
        config["system_instruction"] = parsed(types.Content, req["systemInstruction"])
    if "tools" in req:
        config["tools"] = [parsed(types.Tool, tool) for tool in req["tools"]]
    if "toolConfig" in req:
        config["tool_config"] = parsed(types.ToolConfig, req["toolConfig"])
    if "safetySettings" in req:
        config["safety_settings"] = [parsed(types.SafetySetting, setting) for setting in req["safetySettings"]]
    for key, name in (("cachedContent", "cached_content"), ("labels", "labels"), ("serviceTier", "service_tier")):
        if key in req:
            config[name] = req[key]
    sent = []

    def handler(request):
        sent.append(json.loads(request.content))
        return httpx.Response(200, json={"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}}]})

    google_client(handler, vertex=vertex).models.generate_content(
        model=model, contents=[parsed(types.Content, content) for content in req["contents"]],
        config=types.GenerateContentConfig(**config))
    return _camel_cased(sent[0])


# Values that are the client's own JSON (a function's arguments and result, a JSON schema, labels),
# whose keys are not field names.
OPAQUE = frozenset({"args", "response", "parametersJsonSchema", "responseJsonSchema", "labels"})


def _camel_cased(value, key=None):
    """The SDK's body in the REST reference's field names. google-genai passes some objects through
    with their keys in proto's own names (inlineData's, thinkingConfig's, a function declaration's),
    which Gemini's JSON takes as well; and it sends an empty generationConfig."""
    if isinstance(value, list):
        return [_camel_cased(item) for item in value]
    if not isinstance(value, dict) or key in OPAQUE:
        return value
    out = {}
    for name, item in value.items():
        name = alias_generators.to_camel(name)
        out[name] = _camel_cased(item, name)
    if key is None and out.get("generationConfig") == {}:
        del out["generationConfig"]
    return out


def gemini(body, *, lost=None, model=None, openai_typed=True):
    """The generateContent body of a chat request, and the names it lost, after the oracles have had
    their say on both Google APIs (and the OpenAI SDK's types on the chat request, unless it holds
    Gemini's own extra fields: `openai_typed`)."""
    names = []
    req = chat_to_gemini_request(valid_chat_request(body) if openai_typed else body, lost=names)
    for vertex in (False, True):
        assert sdk_body(req, model=model or body.get("model") or "gemini-2.5-flash", vertex=vertex) == req
    if lost is not None:
        assert names == lost
    return req, names


def valid_chunks(chunks):
    """`chunks`, each read by the OpenAI SDK and passing the gateway's own check of what it reads."""
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
        assert chunk_problem(chunk) is None
    return chunks


def translate(chunks, *, end=True, **options):
    """The chat chunks of Gemini's `chunks` (each read by the SDK first), and the stream after them."""
    stream = GeminiToChatStream("chatcmpl-1", "gem/flash", 1700000000, **options)
    out = []
    for chunk in chunks:
        parsed(types.GenerateContentResponse, chunk)
        out += stream.feed(chunk)
    if end:
        out += stream.end()
    return valid_chunks(out), stream


def deltas(chunks):
    """(choice index, delta, finish_reason) of each chunk with a choice, and the usage chunks' usage."""
    return [(c["choices"][0]["index"], c["choices"][0]["delta"], c["choices"][0]["finish_reason"])
            if c["choices"] else ("usage", c["usage"]) for c in chunks]
