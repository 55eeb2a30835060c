"""POST /api/v1/embeddings, in-process against the reference upstream (its deterministic
bag-of-words vectors). The async view's checks run on a worker thread's connection, so the data
is committed (transactional_db)."""

import time
from types import SimpleNamespace

import pytest
import time_machine

from gateway.models import UsageRecord
from gateway.state.per_process import flush_all
from tests.contract import assert_detail, assert_limit_headers, assert_native_unauthenticated, assert_too_many_attempts
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelFallbackFactory,
    ModelServerFactory,
    api_key_for,
    bearer,
)
from tests.upstream import running_upstream
from tests.upstream.extras import embed
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

URL = "/api/v1/embeddings"


@pytest.fixture
def world(transactional_db, upstream):  # noqa: F811
    group = AccountGroupFactory(name="team", api_access=True)
    account = AccountFactory(group=group, email="dev@example.test")
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=2.0)
    ModelFactory(server=oa, name="echo-1", is_default=True)
    embedder = ModelFactory(server=oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    return SimpleNamespace(group=group, account=account, oa=oa, embedder=embedder, upstream=upstream,
                           headers=bearer(api_key_for(account)))


@pytest.fixture
def frozen():
    with time_machine.travel(time.time(), tick=False) as traveller:
        yield traveller


def post(client, world, body, **extra):
    return client.post(URL, body, content_type="application/json", headers={**world.headers, **extra})


def test_it_embeds_one_string(client, world):
    r = post(client, world, {"input": "the quick brown fox"})
    assert r.status_code == 200, r.content
    assert r["Content-Type"] == "application/json"
    body = r.json()
    assert body == {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": pytest.approx(embed("the quick brown fox", 64))}],
        "model": "oa/embed-1",
        "usage": {"prompt_tokens": 4, "total_tokens": 4},
    }
    assert world.upstream.last.path == "/v1/embeddings"
    assert world.upstream.last.json == {"model": "embed-1", "input": ["the quick brown fox"]}
    assert_limit_headers(r, 30, 29)


def test_it_meters_usage_after_the_reply(client, world):
    post(client, world, {"input": ["one two", "three"]})
    assert flush_all()
    record = UsageRecord.objects.get(account=world.account)
    assert (record.model, record.surface, record.input_tokens, record.output_tokens) == (
        "oa/embed-1", "native_embeddings", 3, 0)
    usage = client.get("/api/v1/usage", headers=world.headers).json()
    assert usage["day"]["used"] == 3


def test_64_items_are_embedded_in_order_and_65_are_refused(client, world):
    texts = [f"item number {i}" for i in range(64)]
    r = post(client, world, {"input": texts})
    assert r.status_code == 200
    data = r.json()["data"]
    assert [d["index"] for d in data] == list(range(64))
    assert data[7]["embedding"] == pytest.approx(embed("item number 7", 64))

    r = post(client, world, {"input": texts + ["one more"]})
    assert r.status_code == 422
    assert r.json() == {"message": "The input may hold at most 64 items; it has 65.",
                        "errors": {"input": ["The input may hold at most 64 items; it has 65."]}}


def test_8000_characters_are_embedded_and_8001_are_refused(client, world):
    assert post(client, world, {"input": ["ok", "a" * 8000]}).status_code == 200
    r = post(client, world, {"input": ["ok", "a" * 8001]})
    assert r.status_code == 422
    assert r.json()["errors"] == {"input": ["Item 1 is longer than 8000 characters (8001)."]}


def test_the_limits_are_settings(client, world, settings):
    settings.EMBEDDINGS_MAX_ITEMS = 2
    settings.EMBEDDINGS_MAX_CHARS = 5
    assert post(client, world, {"input": ["abcde", "x"]}).status_code == 200
    assert post(client, world, {"input": ["a", "b", "c"]}).status_code == 422
    assert post(client, world, {"input": "abcdef"}).status_code == 422


@pytest.mark.parametrize("body", [{}, {"input": []}, {"input": 5}, {"input": ["ok", 3]}, {"input": ""},
                                  {"input": "ok", "model": 7}])
def test_a_malformed_input_is_422(client, world, body):
    r = post(client, world, body)
    assert r.status_code == 422
    assert set(r.json()) == {"message", "errors"}


def test_a_body_that_is_not_json_is_400(client, world):
    r = client.post(URL, "{nope", content_type="application/json", headers=world.headers)
    assert_detail(r, 400)


def test_it_needs_a_credential(client, world):
    assert_native_unauthenticated(client.post(URL, {"input": "x"}, content_type="application/json"))


def test_a_named_model_answers(client, world):
    ModelFactory(server=world.oa, name="embed-2", supports_chat=False, supports_embeddings=True)
    r = post(client, world, {"input": "x", "model": "oa/embed-2"})
    assert r.json()["model"] == "oa/embed-2"
    assert world.upstream.last.json["model"] == "embed-2"


def test_the_embedding_model_setting_is_the_default(client, world, settings):
    ModelFactory(server=world.oa, name="another-embedder", supports_chat=False, supports_embeddings=True)
    assert post(client, world, {"input": "x"}).json()["model"] == "oa/another-embedder"  # the first by server/model
    settings.EMBEDDING_MODEL = "oa/embed-1"
    assert post(client, world, {"input": "x"}).json()["model"] == "oa/embed-1"


def test_a_model_without_embeddings_is_400(client, world):
    r = post(client, world, {"input": "x", "model": "oa/echo-1"})
    assert "does not support embeddings" in assert_detail(r, 400)


def test_a_model_the_group_may_not_use_is_403(client, world):
    world.group.all_models = False
    world.group.save()
    detail = assert_detail(post(client, world, {"input": "x", "model": "oa/embed-1"}), 403)
    assert "not allowed" in detail
    assert world.upstream.requests == []


def test_without_a_model_the_group_may_use_it_is_403(client, world):
    world.group.all_models = False
    world.group.save()
    assert "may not use any embedding model" in assert_detail(post(client, world, {"input": "x"}), 403)


def test_remote_servers_refused_to_the_group_is_403(client, world):
    world.oa.is_remote = True
    world.oa.api_key = "sk-test"
    world.oa.save()
    world.group.remote_servers_allowed = False
    world.group.save()
    assert "remote servers" in assert_detail(post(client, world, {"input": "x", "model": "oa/embed-1"}), 403)


def test_no_embedding_model_at_all_is_503(client, world):
    world.embedder.delete()
    assert assert_detail(post(client, world, {"input": "x"}), 503) == "No embedding model is configured."


def test_a_used_up_quota_is_403_and_nothing_is_sent(client, world):
    post(client, world, {"input": "one two three"})
    world.group.daily_tokens = 3
    world.group.save()
    detail = assert_detail(post(client, world, {"input": "x"}), 403)
    assert "daily ceiling of 3 tokens" in detail
    assert len(world.upstream.requests) == 1


def test_a_failing_model_falls_back_to_the_next(client, world):
    with running_upstream() as other:
        backup_server = ModelServerFactory(name="backup", kind="openai", base_url=f"{other.url}/v1")
        backup = ModelFactory(server=backup_server, name="embed-b", supports_chat=False, supports_embeddings=True)
        ModelFallbackFactory(model=world.embedder, fallback=backup)
        world.upstream.configure(fail_status=503)
        r = post(client, world, {"input": "hello"})
        assert r.status_code == 200
        assert r.json()["model"] == "backup/embed-b"
        assert other.last.json["model"] == "embed-b"
    assert flush_all()
    assert UsageRecord.objects.get().model == "backup/embed-b"


def test_when_every_model_fails_it_is_503_with_retry_after(client, world):
    world.upstream.configure(fail_status=503)
    r = post(client, world, {"input": "hello"})
    assert assert_detail(r, 503).startswith("Every model in the chain is unavailable")
    assert int(r["Retry-After"]) >= 1
    assert flush_all()
    assert not UsageRecord.objects.exists()


@pytest.mark.parametrize("body", [
    None, {}, {"data": []}, {"data": [{"index": 0, "embedding": [1.0]}]},
    {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]},
    {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]},
    {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": ["x"]}]},
    {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [float("nan")]}]},
])
def test_an_unusable_reply_is_refused(body):
    from gateway.calls.embeddings import _vectors_of

    assert _vectors_of(body, 2) is None


def test_a_reply_out_of_order_is_put_in_order():
    from gateway.calls.embeddings import _vectors_of

    body = {"data": [{"index": 1, "embedding": [2.0]}, {"index": 0, "embedding": [1.0]}]}
    assert _vectors_of(body, 2) == [[1.0], [2.0]]


def test_30_a_minute_then_429(client, world, frozen):
    for n in range(30):
        r = post(client, world, {"input": "x"})
        assert r.status_code == 200, n
    assert_limit_headers(r, 30, 0)
    assert_too_many_attempts(post(client, world, {"input": "x"}), 30, now=time.time())
    frozen.shift(61)
    assert post(client, world, {"input": "x"}).status_code == 200


def test_it_also_counts_against_the_general_300(client, world, settings, frozen):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "general": 2}
    assert post(client, world, {"input": "x"}).status_code == 200
    assert client.get("/api/v1/usage", headers=world.headers).status_code == 200
    r = post(client, world, {"input": "x"})
    assert r.status_code == 429
    assert r.json()["codigo"] == "limite_de_requisicoes"
