"""POST /v1/embeddings driven by the official openai SDK through a running gateway, in front of the
reference upstream (its deterministic bag-of-words vectors, 64 numbers each)."""

import base64

import httpx
import numpy as np
import openai
import pytest

from accounts.models import AccountGroup
from gateway.models import UsageRecord
from tests.contract import assert_v1_unauthenticated
from tests.factories import ModelFactory, ModelFallbackFactory, ModelServerFactory
from tests.servers import wait_for_usage
from tests.upstream import running_upstream
from tests.upstream.extras import embed

TEXT = "the quick brown fox"


@pytest.fixture
def embedder(world):
    return ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)


def post(world, body, **headers) -> httpx.Response:
    return httpx.post(f"{world.base}/v1/embeddings", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {world.key}", **headers})


def assert_bad_request(response: httpx.Response, param: str) -> dict:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, "invalid_request_error")
    assert error["message"].startswith(f"{param}: ")
    return error


def test_it_embeds_one_string(world, embedder):
    result = world.openai.embeddings.create(model="oa/embed-1", input=TEXT, encoding_format="float")
    assert result.object == "list"
    assert result.model == "oa/embed-1"
    assert len(result.data) == 1
    item = result.data[0]
    assert (item.object, item.index) == ("embedding", 0)
    assert item.embedding == pytest.approx(embed(TEXT, 64))
    assert (result.usage.prompt_tokens, result.usage.total_tokens) == (4, 4)
    assert world.upstream.last.path == "/v1/embeddings"
    assert world.upstream.last.json == {"model": "embed-1", "input": [TEXT]}


def test_a_list_is_embedded_in_order(world, embedder):
    texts = ["one two", "three", "four five six"]
    result = world.openai.embeddings.create(model="oa/embed-1", input=texts, encoding_format="float")
    assert [d.index for d in result.data] == [0, 1, 2]
    for item, text in zip(result.data, texts):
        assert item.embedding == pytest.approx(embed(text, 64))
    assert result.usage.prompt_tokens == 6
    assert world.upstream.last.json["input"] == texts


def test_the_sdk_default_is_base64_and_decodes_to_the_float32_vectors(world, embedder):
    """The SDK asks for base64 when its caller names no format, and decodes it itself."""
    texts = ["alpha beta", "gamma"]
    floats = world.openai.embeddings.create(model="oa/embed-1", input=texts, encoding_format="float")
    decoded = world.openai.embeddings.create(model="oa/embed-1", input=texts)
    for plain, packed in zip(floats.data, decoded.data):
        assert packed.embedding == np.asarray(plain.embedding, dtype=np.float32).tolist()
    assert decoded.usage == floats.usage


def test_base64_is_the_little_endian_float32_bytes_of_each_vector(world, embedder):
    floats = world.openai.embeddings.create(model="oa/embed-1", input=[TEXT, "x"], encoding_format="float")
    packed = world.openai.embeddings.create(model="oa/embed-1", input=[TEXT, "x"], encoding_format="base64")
    for plain, item in zip(floats.data, packed.data):
        assert isinstance(item.embedding, str)  # asked for by name: the SDK leaves it as sent
        raw = base64.b64decode(item.embedding, validate=True)
        assert raw == np.asarray(plain.embedding, dtype="<f4").tobytes()
        assert len(raw) == 64 * 4
    assert "encoding_format" not in world.upstream.last.json  # the model server is asked for floats


def test_the_answer_carries_the_v1_headers(world, embedder):
    r = post(world, {"model": "oa/embed-1", "input": "hello"})
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert len(r.headers["X-Inference-Request-Id"]) == 32
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) == ("20", "19")
    assert isinstance(r.json()["data"][0]["embedding"], list)  # floats unless base64 is asked for


def test_without_a_model_the_embedding_model_answers(world, embedder):
    r = post(world, {"input": "hello"})
    assert r.status_code == 200
    assert r.json()["model"] == "oa/embed-1"


def test_user_is_taken_and_not_passed_on(world, embedder):
    world.openai.embeddings.create(model="oa/embed-1", input="hi", user="end-user-7")
    assert world.upstream.last.json == {"model": "embed-1", "input": ["hi"]}


def test_dimensions_are_refused_and_nothing_is_sent(world, embedder):
    with pytest.raises(openai.BadRequestError) as exc:
        world.openai.embeddings.create(model="oa/embed-1", input="hi", dimensions=32)
    assert exc.value.param == "dimensions"
    assert world.upstream.requests == []


def test_usage_is_recorded_once_with_the_tokens_of_the_reply(world, embedder):
    result = world.openai.embeddings.create(model="oa/embed-1", input=["one two", "three"])
    [record] = wait_for_usage(world.account)
    assert (record.model, record.surface, record.input_tokens, record.output_tokens) == (
        "oa/embed-1", "embeddings", result.usage.prompt_tokens, 0)
    assert result.usage.prompt_tokens == 3
    world.openai.chat.completions.create(model="oa/echo-1", messages=[{"role": "user", "content": "hi"}])
    assert wait_for_usage(world.account, 2)[1].surface == "chat.completions"
    assert UsageRecord.objects.filter(account=world.account, surface="embeddings").count() == 1


@pytest.mark.parametrize("body, param", [
    ({"model": "oa/embed-1"}, "input"),
    ({"model": "oa/embed-1", "input": 5}, "input"),
    ({"model": "oa/embed-1", "input": []}, "input"),
    ({"model": "oa/embed-1", "input": ["ok", 3]}, "input"),
    ({"model": "oa/embed-1", "input": ["ok", ""]}, "input"),
    ({"model": "oa/embed-1", "input": [101, 202]}, "input"),
    ({"model": "oa/embed-1", "input": [[101], [202]]}, "input"),
    ({"model": 7, "input": "ok"}, "model"),
    ({"model": " ", "input": "ok"}, "model"),
    ({"model": "oa/embed-1", "input": "ok", "encoding_format": "hex"}, "encoding_format"),
    ({"model": "oa/embed-1", "input": "ok", "encoding_format": 1}, "encoding_format"),
    ({"model": "oa/embed-1", "input": "ok", "dimensions": "8"}, "dimensions"),
    ({"model": "oa/embed-1", "input": "ok", "user": 3}, "user"),
])
def test_bad_input_is_a_400_naming_the_field(world, embedder, body, param):
    assert_bad_request(post(world, body), param)
    assert world.upstream.requests == []


def test_the_native_size_limits_apply(world, embedder):
    assert len(world.openai.embeddings.create(model="oa/embed-1", input=["w"] * 64).data) == 64
    error = assert_bad_request(post(world, {"model": "oa/embed-1", "input": ["w"] * 65}), "input")
    assert error["message"] == "input: The input may hold at most 64 items; it has 65."
    error = assert_bad_request(post(world, {"model": "oa/embed-1", "input": ["ok", "a" * 8001]}), "input")
    assert error["message"] == "input: Item 1 is longer than 8000 characters (8001)."


def test_a_body_that_is_not_json_is_a_400(world, embedder):
    r = httpx.post(f"{world.base}/v1/embeddings", content=b"{nope", timeout=30,
                   headers={"Authorization": f"Bearer {world.key}", "Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_without_a_key_it_is_401_in_the_openai_shape(world, embedder):
    assert_v1_unauthenticated(httpx.post(f"{world.base}/v1/embeddings", json={"input": "x"}, timeout=30))
    with pytest.raises(openai.AuthenticationError) as exc:
        openai.OpenAI(base_url=f"{world.base}/v1", api_key="svc_usr_1_" + "x" * 32,
                      max_retries=0).embeddings.create(model="oa/embed-1", input="x")
    assert exc.value.code == "invalid_api_key"


def test_a_server_that_lacks_the_model_is_not_found(world, embedder):
    with pytest.raises(openai.NotFoundError) as exc:
        world.openai.embeddings.create(model="oa/no-such-model", input="x")
    assert (exc.value.code, exc.value.param) == ("model_not_found", "model")


def test_a_model_without_the_embeddings_capability_is_refused(world, embedder):
    with pytest.raises(openai.BadRequestError) as exc:
        world.openai.embeddings.create(model="oa/echo-1", input="x")
    assert exc.value.param == "model"
    assert "does not support embeddings" in exc.value.message
    assert world.upstream.requests == []


def test_a_model_the_group_may_not_use_is_permission_denied(world, embedder):
    AccountGroup.objects.filter(pk=world.group.pk).update(all_models=False)
    world.group.allowed_models.add(world.default)
    with pytest.raises(openai.PermissionDeniedError) as exc:
        world.openai.embeddings.create(model="oa/embed-1", input="x")
    assert exc.value.code == "permission_denied"
    assert exc.value.body["type"] == "permission_error"
    r = post(world, {"input": "x"})  # no model named: there is none it may use
    assert r.status_code == 403
    assert r.json()["error"]["message"] == "Your account group may not use any embedding model."
    assert world.upstream.requests == []


def test_a_used_up_quota_is_permission_denied_before_any_call(world, embedder):
    AccountGroup.objects.filter(pk=world.group.pk).update(daily_tokens=0)
    with pytest.raises(openai.PermissionDeniedError) as exc:
        world.openai.embeddings.create(model="oa/embed-1", input="x")
    assert exc.value.code == "permission_denied" and "daily" in exc.value.message
    assert world.upstream.requests == []


def test_no_embedding_model_at_all_is_503(world):
    r = post(world, {"input": "x"})
    assert r.status_code == 503
    assert r.json()["error"] == {"message": "No embedding model is configured.", "type": "server_error",
                                 "param": None, "code": "no_embedding_model"}


def backup_for(embedder, upstream) -> None:
    """A second embedding model, on another upstream, as `embedder`'s fallback."""
    server = ModelServerFactory(name="backup", kind="openai", base_url=f"{upstream.url}/v1")
    backup = ModelFactory(server=server, name="embed-b", supports_chat=False, supports_embeddings=True)
    ModelFallbackFactory(model=embedder, fallback=backup)


def test_a_failing_model_falls_back_to_the_next(world, embedder):
    with running_upstream() as other:
        backup_for(embedder, other)
        world.upstream.configure(fail_status=503)
        result = world.openai.embeddings.create(model="oa/embed-1", input="hello", encoding_format="float")
        assert result.model == "backup/embed-b"
        assert other.last.json == {"model": "embed-b", "input": ["hello"]}
    assert wait_for_usage(world.account)[0].model == "backup/embed-b"


def test_a_refusal_falls_through_to_the_next_model_on_v1(world, embedder):
    """Spec 7.3: on /v1 a provider's refusal keeps its status only when no other model answers."""
    with running_upstream() as other:
        backup_for(embedder, other)
        world.upstream.configure(fail_status=400)
        result = world.openai.embeddings.create(model="oa/embed-1", input="hello", encoding_format="float")
        assert result.model == "backup/embed-b"


def test_a_refusal_with_no_other_model_keeps_the_providers_status(world, embedder):
    world.upstream.configure(fail_status=400)
    with pytest.raises(openai.BadRequestError) as exc:
        world.openai.embeddings.create(model="oa/embed-1", input="hello")
    assert exc.value.status_code == 400
    assert exc.value.code == "upstream_refused"
    assert not UsageRecord.objects.filter(account=world.account).exists()


def test_when_every_model_fails_it_is_503_with_retry_after(world, embedder):
    world.upstream.configure(fail_status=503)
    with pytest.raises(openai.InternalServerError) as exc:
        world.openai.embeddings.create(model="oa/embed-1", input="hello")
    assert exc.value.status_code == 503
    assert exc.value.code == "service_unavailable"
    assert int(exc.value.response.headers["retry-after"]) >= 1
    assert not UsageRecord.objects.filter(account=world.account).exists()


def test_it_shares_the_v1_ceiling_of_20(world, embedder):
    for _ in range(19):
        world.openai.models.list()
    assert world.openai.embeddings.create(model="oa/embed-1", input="x").data
    with pytest.raises(openai.RateLimitError) as exc:
        world.openai.embeddings.create(model="oa/embed-1", input="x")
    assert exc.value.response.headers["x-ratelimit-limit"] == "20"
    assert int(exc.value.response.headers["retry-after"]) >= 1
