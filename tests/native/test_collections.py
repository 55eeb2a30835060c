"""/api/v1/collections: documents written for real (a PDF and an HTML page made here), searched
through the reference upstream's deterministic bag-of-words embeddings. In-process, with the
data committed (transactional_db) because the async views' checks run on worker threads. CI runs
this file on PostgreSQL; the default local run is on SQLite."""

import time
from types import SimpleNamespace

import httpx
import pytest
import time_machine
from django.core.files.uploadedfile import SimpleUploadedFile

from gateway.models import UsageRecord
from native import vectors
from native.models import Chunk, Collection, Document
from tests.contract import assert_limit_headers, assert_native_unauthenticated, assert_too_many_attempts
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for, bearer
from tests.upstream import running_upstream
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

BASE = "/api/v1/collections"

VOLCANO = ("Basalt volcanoes erupt when magma rises through the crust. The magma chamber fills, pressure "
           "builds, and lava flows from the vent down the slopes of the volcano.")
BREAD = "Sourdough bread needs flour, water, salt and a lively starter of wild yeast, then a long slow proof."
TRAINS = "The night train to the coast leaves the central station at ten and arrives before dawn."


def make_pdf(lines: list[str]) -> bytes:
    """A minimal valid PDF of one page whose content stream shows `lines` in Helvetica."""
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    shown = "".join(f"({escape(line)}) Tj T* " for line in lines)
    stream = f"BT /F1 11 Tf 14 TL 50 750 Td {shown}ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


HTML_PAGE = f"""<!doctype html>
<html><head><title>Kitchen notes</title><style>body {{ color: red }} volcano magma</style>
<script>var lava = "magma volcano eruption";</script></head>
<body><nav>Home | About</nav>
<article><h1>Baking</h1><p>{BREAD}</p><p>Bake it hot &amp; covered for the first twenty minutes.</p></article>
</body></html>"""


@pytest.fixture
def world(transactional_db, upstream):  # noqa: F811
    group = AccountGroupFactory(name="team", api_access=True)
    account = AccountFactory(group=group, email="dev@example.test")
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=2.0)
    ModelFactory(server=oa, name="echo-1", is_default=True)
    ModelFactory(server=oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    vectors.forget()
    yield SimpleNamespace(group=group, account=account, oa=oa, upstream=upstream, headers=bearer(api_key_for(account)))
    vectors.forget()


@pytest.fixture
def frozen():
    with time_machine.travel(time.time(), tick=False) as traveller:
        yield traveller


def create(client, world, name="Notes", **extra):
    r = client.post(BASE, {"name": name, **extra}, content_type="application/json", headers=world.headers)
    assert r.status_code == 201, r.content
    return r.json()


def write_text(client, world, collection_id, name, text, content_type="text/plain", headers=None):
    return client.post(f"{BASE}/{collection_id}/documents", {"name": name, "text": text, "content_type": content_type},
                       content_type="application/json", headers=headers or world.headers)


def upload(client, world, collection_id, filename, data, content_type, headers=None):
    file = SimpleUploadedFile(filename, data, content_type=content_type)
    return client.post(f"{BASE}/{collection_id}/documents", {"file": file}, headers=headers or world.headers)


def first_name(client, world, collection_id, query):
    return search(client, world, collection_id, query).json()["results"][0]["document_name"]


def search(client, world, collection_id, query, k=3, headers=None):
    return client.post(f"{BASE}/{collection_id}/search", {"query": query, "k": k}, content_type="application/json",
                       headers=headers or world.headers)


def assert_collections_error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"status", "code", "message"}, body
    assert body["status"] == "error" and body["code"] == code
    assert isinstance(body["message"], str) and body["message"]
    return body


# --- Real documents, searched --------------------------------------------------------------------


def test_it_writes_a_pdf_and_an_html_page_and_finds_the_right_chunk_first(client, world, settings):
    settings.COLLECTION_CHUNK_CHARS = 200
    settings.COLLECTION_CHUNK_OVERLAP = 40
    collection = create(client, world)
    pdf = make_pdf(["Field guide, chapter three.", *VOLCANO.split(". "), TRAINS, "Index and credits follow."])

    r = upload(client, world, collection["id"], "geology.pdf", pdf, "application/pdf")
    assert r.status_code == 201, r.content
    pdf_doc = r.json()
    assert pdf_doc["name"] == "geology.pdf" and pdf_doc["content_type"] == "application/pdf"
    assert pdf_doc["size"] == len(pdf) and pdf_doc["chunk_count"] >= 2

    r = upload(client, world, collection["id"], "kitchen.html", HTML_PAGE.encode(), "text/html; charset=utf-8")
    assert r.status_code == 201, r.content
    html_doc = r.json()
    stored = Document.objects.get(pk=html_doc["id"]).text
    assert "Sourdough bread" in stored and "Kitchen notes" in stored and "Bake it hot & covered" in stored
    assert "var lava" not in stored and "color: red" not in stored

    r = search(client, world, collection["id"], "how does magma erupt from a volcano")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["collection_id"] == collection["id"] and body["model"] == "oa/embed-1"
    first = body["results"][0]
    assert set(first) == {"chunk_id", "document_id", "document_name", "position", "text", "score"}
    assert first["document_id"] == pdf_doc["id"] and first["document_name"] == "geology.pdf"
    assert "magma" in first["text"]
    scores = [hit["score"] for hit in body["results"]]
    assert scores == sorted(scores, reverse=True) and 0 < scores[0] <= 1

    hits = search(client, world, collection["id"], "bread with flour and wild yeast").json()["results"]
    assert hits[0]["document_id"] == html_doc["id"] and "Sourdough" in hits[0]["text"]
    hits = search(client, world, collection["id"], "when does the night train leave the station").json()["results"]
    assert hits[0]["document_id"] == pdf_doc["id"] and "night train" in hits[0]["text"]


def test_a_markdown_file_and_a_json_text_document(client, world):
    collection = create(client, world)
    r = upload(client, world, collection["id"], "trains.md", f"# Travel\n\n{TRAINS}".encode(),
               "application/octet-stream")
    assert r.status_code == 201 and r.json()["content_type"] == "text/markdown"
    r = write_text(client, world, collection["id"], "bread", BREAD)
    assert r.status_code == 201
    assert set(r.json()) == {"id", "collection_id", "name", "content_type", "size", "chunk_count", "created_at"}
    assert search(client, world, collection["id"], "sourdough starter").json()["results"][0]["document_name"] == "bread"


def test_k_limits_the_hits(client, world):
    collection = create(client, world)
    for i, text in enumerate([VOLCANO, BREAD, TRAINS]):
        write_text(client, world, collection["id"], f"d{i}", text)
    assert len(search(client, world, collection["id"], "bread", k=2).json()["results"]) == 2
    assert len(search(client, world, collection["id"], "bread", k=50).json()["results"]) == 3
    r = search(client, world, collection["id"], "bread", k=51)
    assert r.status_code == 422 and set(r.json()["errors"]) == {"k"}
    assert search(client, world, collection["id"], "bread", k=0).status_code == 422


def test_an_empty_collection_finds_nothing_without_calling_a_model(client, world):
    collection = create(client, world)
    r = search(client, world, collection["id"], "anything")
    assert r.status_code == 200 and r.json()["results"] == []
    assert world.upstream.requests == []


def test_a_search_sees_a_document_written_after_the_vectors_were_cached(client, world):
    collection = create(client, world)
    write_text(client, world, collection["id"], "bread", BREAD)
    assert first_name(client, world, collection["id"], "volcano magma lava") == "bread"
    write_text(client, world, collection["id"], "volcano", VOLCANO)
    assert first_name(client, world, collection["id"], "volcano magma lava") == "volcano"
    doc_id = Document.objects.get(name="volcano").pk
    assert client.delete(f"{BASE}/{collection['id']}/documents/{doc_id}", headers=world.headers).status_code == 204
    hits = search(client, world, collection["id"], "volcano magma lava").json()["results"]
    assert [h["document_name"] for h in hits] == ["bread"]


def test_a_write_keeps_the_writers_cached_vectors_and_its_next_search_appends(client, world):
    collection = create(client, world)
    write_text(client, world, collection["id"], "bread", BREAD)
    assert first_name(client, world, collection["id"], "night train station") == "bread"
    kept = vectors.matrix_for(Collection.objects.get())  # the searched matrix, read whole
    assert kept.spare is None and len(kept.ids) == 1
    write_text(client, world, collection["id"], "trains", TRAINS)
    assert first_name(client, world, collection["id"], "night train station") == "trains"
    appended = vectors.matrix_for(Collection.objects.get())
    assert appended.spare is not None and len(appended.ids) == 2  # the kept rows, one appended
    write_text(client, world, collection["id"], "volcano", VOLCANO)
    assert first_name(client, world, collection["id"], "volcano magma lava") == "volcano"
    assert vectors.matrix_for(Collection.objects.get()).spare is appended.spare  # appended in place
    client.delete(f"{BASE}/{collection['id']}", headers=world.headers)
    assert len(vectors.matrix_for(SimpleNamespace(pk=collection["id"], vectors_version=0,
                                                  vectors_generation=0)).ids) == 0  # forgotten


def test_a_write_in_another_process_is_seen_by_the_next_search(client, world, live_gateway):
    collection = create(client, world)
    write_text(client, world, collection["id"], "bread", BREAD)
    assert first_name(client, world, collection["id"], "night train station") == "bread"
    r = httpx.post(f"{live_gateway}{BASE}/{collection['id']}/documents", headers=world.headers, timeout=10,
                   json={"name": "trains", "text": TRAINS})
    assert r.status_code == 201, r.text
    hits = search(client, world, collection["id"], "night train station").json()["results"]
    assert hits[0]["document_name"] == "trains"


def test_a_large_document_keeps_its_vectors_packed_while_it_is_embedded(client, world, settings):
    """Only float32 bytes are kept across batches: a vector of Python floats takes about eight
    times as much memory. Measured on the embedding step alone (the database's own buffers for
    the insert differ between SQLite and PostgreSQL), then the whole write is checked."""
    import tracemalloc

    from asgiref.sync import async_to_sync

    from gateway.embeddings import embed_batched
    from gateway.routing import registry

    world.upstream.configure(embedding_dim=1024, record=False)
    texts = [f"Paragraph {i} tells of basalt, magma and trains." for i in range(400)]
    target = registry().by_public_id["oa/embed-1"]
    tracemalloc.start()
    try:
        packed = async_to_sync(embed_batched)(target, texts, batch_size=8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    size = 400 * 1024 * 4
    assert [len(blob) for blob in packed.blobs] == [1024 * 4] * 400
    assert peak < 3 * size, f"peak {peak / 2**20:.1f} MB for {size / 2**20:.1f} MB of vectors"

    settings.EMBEDDING_BATCH_SIZE, settings.COLLECTION_CHUNK_CHARS, settings.COLLECTION_CHUNK_OVERLAP = 8, 60, 0
    collection = create(client, world)
    r = write_text(client, world, collection["id"], "long", "\n\n".join(texts))
    assert r.status_code == 201, r.content
    assert r.json()["chunk_count"] == 400
    assert {len(bytes(c.embedding)) for c in Chunk.objects.all()} == {1024 * 4}
    assert first_name(client, world, collection["id"], "Paragraph 123 basalt") == "long"


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


# --- search_collection, the function other parts call ----------------------------------------------


def test_search_collection_ranks_and_meters_the_account_that_searches(client, world):
    from asgiref.sync import async_to_sync

    from native.search import search_collection

    created = create(client, world)
    for name, text in (("volcano", VOLCANO), ("bread", BREAD)):
        write_text(client, world, created["id"], name, text)
    collection = Collection.objects.get()
    reader = AccountFactory(group=world.group, email="reader@example.test")
    hits = async_to_sync(search_collection)(collection, "sourdough yeast", k=1, account=reader, request_id="r-1")
    assert [(h["document_name"], h["position"]) for h in hits] == [("bread", 0)]
    assert set(hits[0]) == {"chunk_id", "document_id", "document_name", "position", "text", "score"}
    record = UsageRecord.objects.get(request_id="r-1")
    assert (record.account_id, record.surface, record.input_tokens) == (reader.pk, "native_collections", 2)
