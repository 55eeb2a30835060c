"""/api/v1/collections: documents written for real (a PDF and an HTML page made here), searched
through the reference upstream's deterministic bag-of-words embeddings. In-process, with the
data committed (transactional_db) because the async views' checks run on worker threads. CI runs
this file on PostgreSQL; the default local run is on SQLite. The routes themselves (create,
refusals, ceilings): test_collections_api.py."""

from types import SimpleNamespace

import httpx

from gateway.models import UsageRecord
from gateway.state.per_process import flush_all
from native import vectors
from native.models import Chunk, Collection, Document
from tests.factories import AccountFactory
from tests.native.collections_support import (  # noqa: F401 — the fixture `world`
    BASE,
    BREAD,
    HTML_PAGE,
    TRAINS,
    VOLCANO,
    create,
    first_name,
    make_pdf,
    search,
    upload,
    world_fixture,
    write_text,
)

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

    from gateway.calls.embeddings import embed_batched
    from gateway.registry.snapshot import registry

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
    assert flush_all()
    record = UsageRecord.objects.get(request_id="r-1")
    assert (record.account_id, record.surface, record.input_tokens) == (reader.pk, "native_collections", 2)
