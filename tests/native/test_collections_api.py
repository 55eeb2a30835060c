"""/api/v1/collections, the routes themselves: collections and documents created, listed, got and
deleted; what is refused (content types, sizes, unreadable documents, quotas, another account's
collection, no credential); metering; a change of embedding model; the request ceilings.
In-process, with the data committed (transactional_db)."""

import time

import pytest
import time_machine

from gateway.models import UsageRecord
from gateway.state.per_process import flush_all
from native.models import Chunk, Collection, Document
from tests.contract import assert_limit_headers, assert_native_unauthenticated, assert_too_many_attempts
from tests.factories import AccountFactory, ModelFactory, ModelServerFactory, api_key_for, bearer
from tests.native.collections_support import (  # noqa: F401 — the fixture `world`
    BASE,
    BREAD,
    TRAINS,
    VOLCANO,
    assert_collections_error,
    create,
    search,
    upload,
    world_fixture,
    write_text,
)
from tests.upstream import running_upstream


@pytest.fixture
def frozen():
    with time_machine.travel(time.time(), tick=False) as traveller:
        yield traveller


# --- Collections and documents -----------------------------------------------------------------


def test_create_list_get_and_delete(client, world):
    created = create(client, world, name="Handbook", description="Team handbook")
    assert set(created) == {"id", "name", "description", "embedding_model", "document_count", "created_at",
                            "updated_at"}
    assert (created["name"], created["description"], created["embedding_model"], created["document_count"]) == (
        "Handbook", "Team handbook", None, 0)
    write_text(client, world, created["id"], "bread", BREAD)
    write_text(client, world, created["id"], "trains", TRAINS)

    listed = client.get(BASE, headers=world.headers).json()["data"]
    assert [(c["id"], c["document_count"]) for c in listed] == [(created["id"], 2)]
    one = client.get(f"{BASE}/{created['id']}", headers=world.headers).json()
    assert one["document_count"] == 2 and one["embedding_model"] == "oa/embed-1"
    docs = client.get(f"{BASE}/{created['id']}/documents", headers=world.headers).json()["data"]
    assert [d["name"] for d in docs] == ["trains", "bread"]
    assert all(d["chunk_count"] == 1 for d in docs)

    assert client.delete(f"{BASE}/{created['id']}", headers=world.headers).status_code == 204
    assert_collections_error(client.get(f"{BASE}/{created['id']}", headers=world.headers), 404, "not_found")
    assert not Chunk.objects.exists()


def test_creating_needs_a_name(client, world):
    r = client.post(BASE, {"description": "x"}, content_type="application/json", headers=world.headers)
    assert r.status_code == 422
    assert set(r.json()) == {"message", "errors"} and set(r.json()["errors"]) == {"name"}
    r = client.post(BASE, {"name": "x" * 121}, content_type="application/json", headers=world.headers)
    assert r.status_code == 422


def test_unknown_documents_and_collections_are_404(client, world):
    collection = create(client, world)
    assert_collections_error(client.delete(f"{BASE}/{collection['id']}/documents/999", headers=world.headers),
                             404, "not_found")
    assert_collections_error(search(client, world, 99999, "x"), 404, "not_found")


def test_a_method_the_route_does_not_take_is_405(client, world):
    r = client.put(BASE, {}, content_type="application/json", headers=world.headers)
    assert r.status_code == 405 and r["Allow"] == "GET, POST"


def test_it_needs_a_credential(client, world):
    assert_native_unauthenticated(client.get(BASE))
    assert_native_unauthenticated(client.post(f"{BASE}/1/search", {"query": "x"}, content_type="application/json"))


def test_another_accounts_collection_is_not_found(client, world):
    collection = create(client, world)
    write_text(client, world, collection["id"], "bread", BREAD)
    doc_id = Document.objects.get().pk
    other = bearer(api_key_for(AccountFactory(group=world.group, email="other@example.test")))
    cid = collection["id"]
    assert client.get(BASE, headers=other).json() == {"data": []}
    for response in (
        client.get(f"{BASE}/{cid}", headers=other),
        client.get(f"{BASE}/{cid}/documents", headers=other),
        write_text(client, world, cid, "mine", TRAINS, headers=other),
        search(client, world, cid, "bread", headers=other),
        client.post(f"{BASE}/{cid}/reindex", headers=other),
        client.delete(f"{BASE}/{cid}/documents/{doc_id}", headers=other),
        client.delete(f"{BASE}/{cid}", headers=other),
    ):
        assert_collections_error(response, 404, "not_found")
    assert Document.objects.filter(collection_id=cid).count() == 1
    assert search(client, world, cid, "bread").json()["results"][0]["document_name"] == "bread"


# --- What is refused ---------------------------------------------------------------------------


def test_an_unsupported_content_type_is_415(client, world):
    collection = create(client, world)
    r = upload(client, world, collection["id"], "photo.png", b"\x89PNG....", "image/png")
    assert_collections_error(r, 415, "unsupported_media_type")
    r = write_text(client, world, collection["id"], "x", "hello", content_type="application/msword")
    assert_collections_error(r, 415, "unsupported_media_type")
    assert not Document.objects.exists()


def test_a_document_over_the_size_cap_is_413(client, world, settings):
    settings.COLLECTION_MAX_DOCUMENT_BYTES = 100
    collection = create(client, world)
    assert upload(client, world, collection["id"], "a.txt", b"word " * 20, "text/plain").status_code == 201
    assert_collections_error(upload(client, world, collection["id"], "b.txt", b"word " * 20 + b"x", "text/plain"),
                             413, "payload_too_large")
    assert_collections_error(write_text(client, world, collection["id"], "c", "w" * 101), 413, "payload_too_large")


def test_an_unreadable_pdf_or_an_empty_document_is_422(client, world):
    collection = create(client, world)
    r = upload(client, world, collection["id"], "broken.pdf", b"%PDF-1.4\nnot really", "application/pdf")
    assert r.status_code == 422 and r.json()["errors"] == {"file": ["The PDF could not be read."]}
    r = upload(client, world, collection["id"], "empty.html", b"<html><script>x()</script></html>", "text/html")
    assert r.status_code == 422 and r.json()["errors"] == {"file": ["No text could be extracted from the document."]}
    r = client.post(f"{BASE}/{collection['id']}/documents", {"name": "no file"}, headers=world.headers)
    assert r.status_code == 422 and set(r.json()["errors"]) == {"file"}
    r = write_text(client, world, collection["id"], "pdf", "text", content_type="application/pdf")
    assert r.status_code == 422 and set(r.json()["errors"]) == {"content_type"}
    assert not Document.objects.exists()


def test_a_used_up_quota_is_403(client, world):
    collection = create(client, world)
    write_text(client, world, collection["id"], "bread", BREAD)
    world.group.daily_tokens = 5
    world.group.save()
    assert_collections_error(search(client, world, collection["id"], "bread"), 403, "permission_denied")
    assert_collections_error(write_text(client, world, collection["id"], "t", TRAINS), 403, "permission_denied")


def test_embedding_calls_are_metered(client, world):
    collection = create(client, world)
    write_text(client, world, collection["id"], "bread", "one two three")
    search(client, world, collection["id"], "four five")
    assert flush_all()
    records = list(UsageRecord.objects.order_by("id").values_list("surface", "model", "input_tokens"))
    assert records == [("native_collections", "oa/embed-1", 3), ("native_collections", "oa/embed-1", 2)]


# --- Another embedding model ---------------------------------------------------------------------


def test_after_the_embedding_model_changes_search_asks_for_a_reindex(client, world, settings):
    collection = create(client, world)
    cid = collection["id"]
    for name, text in (("volcano", VOLCANO), ("bread", BREAD), ("trains", TRAINS)):
        write_text(client, world, cid, name, text)
    with running_upstream(embedding_dim=32) as other:
        server = ModelServerFactory(name="lab", kind="openai", base_url=f"{other.url}/v1")
        ModelFactory(server=server, name="embed-small", supports_chat=False, supports_embeddings=True)
        settings.EMBEDDING_MODEL = "lab/embed-small"

        body = assert_collections_error(search(client, world, cid, "bread"), 409, "reindex_required")
        assert "'oa/embed-1'" in body["message"] and "'lab/embed-small'" in body["message"]
        assert_collections_error(write_text(client, world, cid, "x", "more"), 409, "reindex_required")

        r = client.post(f"{BASE}/{cid}/reindex", headers=world.headers)
        assert r.status_code == 200, r.content
        assert r.json()["embedding_model"] == "lab/embed-small" and r.json()["reindexed_chunks"] == 3
        assert {len(bytes(c.embedding)) for c in Chunk.objects.all()} == {32 * 4}
        assert other.last.json["model"] == "embed-small"

        hits = search(client, world, cid, "magma and lava from the volcano").json()["results"]
        assert hits[0]["document_name"] == "volcano"
        assert write_text(client, world, cid, "x", "more").status_code == 201
    assert Collection.objects.get().embedding_model == "lab/embed-small"


# --- Request ceilings ------------------------------------------------------------------------------


def test_30_writes_a_minute_then_429(client, world, frozen):
    collection = create(client, world)
    for n in range(30):
        r = write_text(client, world, collection["id"], f"d{n}", f"note {n}")
        assert r.status_code == 201, n
    assert_limit_headers(r, 30, 0)
    assert_too_many_attempts(write_text(client, world, collection["id"], "late", "x"), 30, now=time.time())
    assert Document.objects.count() == 30
    assert client.get(f"{BASE}/{collection['id']}/documents", headers=world.headers).status_code == 200
    frozen.shift(61)
    assert write_text(client, world, collection["id"], "next minute", "x").status_code == 201


def test_60_searches_a_minute_then_429(client, world, frozen):
    collection = create(client, world)
    write_text(client, world, collection["id"], "bread", BREAD)
    for n in range(60):
        r = search(client, world, collection["id"], "bread")
        assert r.status_code == 200, n
    assert_limit_headers(r, 60, 0)
    assert_too_many_attempts(search(client, world, collection["id"], "bread"), 60, now=time.time())


def test_6_reindexes_a_minute_then_429(client, world, frozen):
    collection = create(client, world)
    write_text(client, world, collection["id"], "bread", BREAD)
    for n in range(6):
        r = client.post(f"{BASE}/{collection['id']}/reindex", headers=world.headers)
        assert r.status_code == 200, n
    assert_limit_headers(r, 6, 0)
    assert_too_many_attempts(client.post(f"{BASE}/{collection['id']}/reindex", headers=world.headers), 6,
                             now=time.time())
