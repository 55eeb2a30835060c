"""The Gemini surface's credentials, errors, token counting, embeddings and model list, through the
running gateway with the google-genai SDK and plain HTTP."""

import httpx
import pytest
from google.genai import errors, types

from accounts.models import AccountGroup
from gateway.telemetry import logfilters
from tests.compat.gemini.conftest import client_for
from tests.factories import ModelFactory
from tests.servers import wait_for_usage

BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
UNAUTHENTICATED = {"error": {"message": "Unauthenticated.", "type": "invalid_request_error", "param": None,
                             "code": "invalid_api_key"}}


def post(world, path: str, body=BODY, **headers) -> httpx.Response:
    return httpx.post(f"{world.base}{path}", json=body, headers=headers, timeout=30)


@pytest.mark.parametrize("how", ["x-goog-api-key", "query", "bearer"])
def test_the_gateway_key_is_taken_as_google_sends_it_or_as_bearer(world, how):
    path, headers = "/v1beta/models/oa/echo-1:generateContent", {}
    if how == "x-goog-api-key":
        headers["x-goog-api-key"] = world.key
    elif how == "query":
        path += f"?key={world.key}"
    else:
        headers["Authorization"] = f"Bearer {world.key}"
    response = post(world, path, **headers)
    assert response.status_code == 200, response.text
    assert response.json()["candidates"][0]["content"]["parts"] == [{"text": "Echo: hi"}]
    assert response.headers["X-RateLimit-Limit"] == "20"


def test_a_wrong_key_is_googles_401_on_v1beta_and_the_chat_completions_401_on_v1(world):
    wrong = "svc_usr_1_" + "0" * 40
    response = post(world, "/v1beta/models/oa/echo-1:generateContent", **{"x-goog-api-key": wrong})
    assert response.status_code == 401
    assert response.json() == {"error": {"code": 401, "message": "Unauthenticated.", "status": "UNAUTHENTICATED"}}
    assert "X-RateLimit-Limit" not in response.headers
    response = post(world, f"/v1/models/oa/echo-1:generateContent?key={wrong}")
    assert (response.status_code, response.json()) == (401, UNAUTHENTICATED)
    client = client_for(world, key=wrong)  # held: the SDK closes its connections when it is collected
    with pytest.raises(errors.ClientError) as exc:
        client.models.generate_content(model="oa/echo-1", contents="hi")
    assert (exc.value.code, exc.value.status) == (401, "UNAUTHENTICATED")


def test_the_x_goog_api_key_is_not_read_elsewhere(world):
    response = httpx.get(f"{world.base}/v1/models", headers={"x-goog-api-key": world.key})
    assert response.status_code == 401


def test_a_model_the_group_may_not_use_is_permission_denied(world, gemini):
    AccountGroup.objects.filter(pk=world.group.pk).update(all_models=False)
    world.group.allowed_models.add(world.default)
    with pytest.raises(errors.ClientError) as exc:
        gemini.models.generate_content(model="an/claude-echo", contents="hi")
    assert (exc.value.code, exc.value.status) == (403, "PERMISSION_DENIED")
    assert gemini.models.generate_content(model="oa/echo-1", contents="hi").text == "Echo: hi"
    names = [m.name for m in gemini.models.list()]
    assert names == ["models/oa/echo-1"]


def test_the_ceiling_is_googles_429_on_v1beta_and_the_specs_on_v1(world):
    for _ in range(20):
        assert httpx.get(f"{world.base}/v1beta/models", headers={"x-goog-api-key": world.key}).status_code == 200
    response = post(world, "/v1beta/models/oa/echo-1:generateContent", **{"x-goog-api-key": world.key})
    assert response.status_code == 429 and response.headers["Retry-After"]
    assert response.json() == {"error": {"code": 429, "message": "Too Many Attempts.", "status": "RESOURCE_EXHAUSTED"}}
    response = post(world, "/v1/models/oa/echo-1:generateContent", Accept="application/json",
                    **{"x-goog-api-key": world.key})
    assert (response.status_code, response.json()) == (429, {"message": "Too Many Attempts."})


def test_a_field_the_server_cannot_carry_is_refused_by_name(world, gemini):
    config = types.GenerateContentConfig(cached_content="cachedContents/abc")
    with pytest.raises(errors.ClientError) as exc:
        gemini.models.generate_content(model="an/claude-echo", contents="hi", config=config)
    assert (exc.value.code, exc.value.status) == (400, "INVALID_ARGUMENT")
    assert "'cachedContent'" in exc.value.message
    response = post(world, "/v1beta/models/oa/echo-1:generateContent", {"contents": "nope"},
                    **{"x-goog-api-key": world.key})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "contents: a non-empty list of contents is required."


def test_a_method_the_gateway_does_not_have_is_refused(world):
    response = post(world, "/v1beta/models/oa/echo-1:predictLongRunning", **{"x-goog-api-key": world.key})
    assert (response.status_code, response.headers["Allow"]) == (405, "GET")  # the path of a model's entry
    assert response.json() == {"error": {"code": 405, "message": "Method Not Allowed.", "status": "INVALID_ARGUMENT"}}
    response = httpx.get(f"{world.base}/v1beta/models/oa/echo-1:predictLongRunning",
                         headers={"x-goog-api-key": world.key})
    assert response.status_code == 404 and response.json()["error"]["status"] == "NOT_FOUND"


def test_tokens_are_counted(world, gemini):
    counted = gemini.models.count_tokens(model="oa/echo-1", contents="hello there, how are you?")
    assert counted.total_tokens > 0
    whole = post(world, "/v1beta/models/oa/echo-1:countTokens",
                 {"generateContentRequest": {"contents": [{"parts": [{"text": "hello there, how are you?"}]}]}},
                 **{"x-goog-api-key": world.key})
    assert whole.json() == {"totalTokens": counted.total_tokens}


def test_the_model_list_is_googles_shape_of_what_the_group_may_use(world, gemini):
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True, context_window=2048)
    listed = {m.name: m for m in gemini.models.list()}
    assert set(listed) == {"models/oa/echo-1", "models/an/claude-echo", "models/oa/embed-1"}
    assert listed["models/oa/echo-1"].supported_actions == ["generateContent", "streamGenerateContent", "countTokens"]
    assert listed["models/oa/embed-1"].supported_actions == ["embedContent", "batchEmbedContents"]
    assert listed["models/oa/embed-1"].input_token_limit == 2048
    one = gemini.models.get(model="an/claude-echo")
    assert (one.name, one.display_name) == ("models/an/claude-echo", "an/claude-echo")
    with pytest.raises(errors.ClientError) as exc:
        gemini.models.get(model="oa/nothing")
    assert exc.value.code == 404
    assert httpx.get(f"{world.base}/v1/models", headers={"x-api-key": world.key}).json()["object"] == "list"


def test_contents_are_embedded(world, gemini):
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    one = gemini.models.embed_content(model="oa/embed-1", contents="the quick brown fox")
    assert len(one.embeddings) == 1 and len(one.embeddings[0].values) == 64
    response = post(world, "/v1beta/models/oa/embed-1:batchEmbedContents",
                    {"requests": [{"model": "models/oa/embed-1", "content": {"parts": [{"text": t}]}}
                                  for t in ("the quick brown fox", "a lazy dog")]},
                    **{"x-goog-api-key": world.key})
    vectors = [e["values"] for e in response.json()["embeddings"]]
    assert len(vectors) == 2 and vectors[0] == one.embeddings[0].values
    records = wait_for_usage(world.account, 2)
    assert {(r.surface, r.model, r.output_tokens) for r in records} == {("gemini", "oa/embed-1", 0)}
    refused = post(world, "/v1beta/models/oa/embed-1:embedContent",
                   {"content": {"parts": [{"text": "x"}]}, "outputDimensionality": 8}, **{"x-goog-api-key": world.key})
    assert refused.status_code == 400 and "outputDimensionality" in refused.json()["error"]["message"]


def test_a_key_in_the_query_is_redacted_from_an_access_log_line():
    line = '127.0.0.1:5 - "POST /v1beta/models/oa/echo-1:streamGenerateContent?alt=sse&key=svc_usr_1_abc HTTP/1.1" 200'
    assert logfilters.redact(line) == ('127.0.0.1:5 - "POST /v1beta/models/oa/echo-1:streamGenerateContent'
                                       '?alt=sse&key=[redacted] HTTP/1.1" 200')
