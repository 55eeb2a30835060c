"""The vector store of collections (native/vectors.py), text extraction and chunking, through their
public functions."""

import struct

import numpy as np
import pytest

from gateway.web.errors import ApiError, ValidationFailed
from native import extract, vectors
from native.chunking import chunk_text
from native.models import Chunk, Collection, Document
from tests.factories import AccountFactory, ChunkFactory, CollectionFactory, DocumentFactory


@pytest.fixture(autouse=True)
def empty_cache():
    vectors.forget()
    yield
    vectors.forget()


@pytest.fixture
def collection(db):
    return CollectionFactory(account=AccountFactory(), name="c")


def add_chunks(collection, rows):
    document = DocumentFactory(collection=collection, name="d", content_type="text/plain")
    return [ChunkFactory(collection=collection, document=document, position=i, text=f"t{i}",
                         embedding=vectors.to_blobs([row])[0]) for i, row in enumerate(rows)]


def bump(collection, changed=False):
    """What a change made in another process leaves behind: a newer version on the row (and a
    newer generation when stored vectors changed or went), nothing else."""
    Collection.objects.filter(pk=collection.pk).update(
        vectors_version=collection.vectors_version + 1,
        vectors_generation=collection.vectors_generation + (1 if changed else 0))
    collection.refresh_from_db()


def more_chunks(collection, rows):
    document = Document.objects.filter(collection=collection).first()
    return [ChunkFactory(collection=collection, document=document, position=100 + i, text="more",
                         embedding=vectors.to_blobs([row])[0]) for i, row in enumerate(rows)]


def test_blobs_are_normalised_little_endian_float32():
    blob = vectors.to_blobs([[3.0, 4.0]])[0]
    assert blob == struct.pack("<2f", 0.6, 0.8)
    assert vectors.to_blobs([[0.0, 0.0]])[0] == struct.pack("<2f", 0.0, 0.0)


def test_top_k_ranks_by_cosine_best_first(collection):
    chunks = add_chunks(collection, [[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [-1, 0, 0]])
    matrix = vectors.matrix_for(collection)
    ranked = vectors.top_k(matrix, [10, 0, 0], 3)
    assert [chunk_id for chunk_id, _ in ranked] == [chunks[0].pk, chunks[1].pk, chunks[2].pk]
    assert ranked[0][1] == pytest.approx(1.0) and ranked[2][1] == pytest.approx(0.0)
    assert [c for c, _ in vectors.top_k(matrix, [-1, 0, 0], 10)] == [chunks[3].pk, chunks[2].pk, chunks[1].pk,
                                                                      chunks[0].pk]


def test_equal_scores_keep_the_older_chunk_first(collection):
    chunks = add_chunks(collection, [[0, 1], [1, 0], [1, 0], [1, 0]])
    ranked = vectors.top_k(vectors.matrix_for(collection), [1, 0], 2)
    assert [c for c, _ in ranked] == [chunks[1].pk, chunks[2].pk]


def test_the_matrix_is_cached_until_the_version_moves(collection, django_assert_num_queries):
    add_chunks(collection, [[1, 0], [0, 1]])
    first = vectors.matrix_for(collection)
    with django_assert_num_queries(0):
        assert vectors.matrix_for(collection) is first
    ChunkFactory(collection=collection, document=Document.objects.get(), position=2, text="new",
                 embedding=vectors.to_blobs([[1, 1]])[0])
    assert len(vectors.matrix_for(collection).ids) == 2  # no version moved: still the cached one
    bump(collection)
    fresh = vectors.matrix_for(collection)
    assert fresh is not first and len(fresh.ids) == 3 and fresh.version == collection.vectors_version


def test_a_write_elsewhere_is_appended_to_the_kept_matrix(collection, django_assert_num_queries):
    add_chunks(collection, np.eye(4)[:2])
    first = vectors.matrix_for(collection)
    more_chunks(collection, np.eye(4)[2:3])
    bump(collection)
    with django_assert_num_queries(1):  # only the chunks past the last id kept
        second = vectors.matrix_for(collection)
    more_chunks(collection, np.eye(4)[3:4])
    bump(collection)
    third = vectors.matrix_for(collection)
    assert third.spare is second.spare  # appended in place, no copy
    whole = vectors.load(collection.pk, version=collection.vectors_version)
    assert np.array_equal(third.ids, whole.ids) and np.array_equal(third.vectors, whole.vectors)
    assert len(first.ids) == 2 and len(second.ids) == 3 and len(third.ids) == 4
    assert np.array_equal(second.vectors, whole.vectors[:3])  # the older matrices are unchanged


def test_a_stale_matrix_appending_again_does_not_overwrite_a_newer_one(collection):
    add_chunks(collection, np.eye(4)[:1])
    vectors.matrix_for(collection)
    more_chunks(collection, np.eye(4)[1:2])
    bump(collection)
    older = vectors.matrix_for(collection)  # has a spare buffer
    more_chunks(collection, np.eye(4)[2:3])
    bump(collection)
    newer = vectors.matrix_for(collection)  # appended into that buffer
    assert newer.spare is older.spare
    kept = newer.vectors.copy()
    vectors.forget(collection.pk)
    vectors.remember(collection.pk, older)  # as if this thread had kept the older matrix
    Chunk.objects.filter(pk=newer.ids[-1]).delete()  # so its rows differ from what `newer` holds
    more_chunks(collection, np.eye(4)[3:4])
    bump(collection)
    other = vectors.matrix_for(collection)
    assert other.spare is not newer.spare
    assert np.array_equal(newer.vectors, kept)
    assert np.array_equal(other.vectors[2], np.eye(4)[3])


def test_a_delete_or_reindex_elsewhere_reads_the_matrix_again(collection):
    chunks = add_chunks(collection, np.eye(3))
    vectors.matrix_for(collection)
    Chunk.objects.filter(pk=chunks[0].pk).delete()
    bump(collection, changed=True)
    fresh = vectors.matrix_for(collection)
    assert list(fresh.ids) == [chunks[1].pk, chunks[2].pk] and fresh.generation == 1


def test_an_older_version_never_replaces_a_newer_one(collection):
    add_chunks(collection, [[1, 0]])
    bump(collection)
    newer = vectors.matrix_for(collection)
    stale = vectors.load(collection.pk, version=0)
    vectors.remember(collection.pk, stale)
    assert vectors.matrix_for(collection) is newer


def test_the_cache_keeps_to_its_budget(db, settings):
    settings.COLLECTION_VECTOR_CACHE_MB = 1
    owner = AccountFactory()
    big = [CollectionFactory(account=owner, name=f"c{i}") for i in range(3)]
    for c in big:
        add_chunks(c, np.random.default_rng(1).random((100, 1000)))  # 400 kB each
    kept = [vectors.matrix_for(c) for c in big]
    assert vectors.matrix_for(big[2]) is kept[2] and vectors.matrix_for(big[1]) is kept[1]
    assert vectors.matrix_for(big[0]) is not kept[0]  # the least recently used was dropped


def test_a_matrix_larger_than_the_budget_is_used_but_not_kept(collection, settings):
    settings.COLLECTION_VECTOR_CACHE_MB = 0
    add_chunks(collection, [[1, 0]])
    assert vectors.matrix_for(collection) is not vectors.matrix_for(collection)


def test_an_empty_collection_has_an_empty_matrix(collection):
    matrix = vectors.matrix_for(collection)
    assert len(matrix.ids) == 0 and vectors.top_k(matrix, [1.0], 5) == []


def test_a_query_of_another_size_asks_for_a_reindex(collection):
    add_chunks(collection, [[1, 0, 0]])
    with pytest.raises(ApiError) as exc:
        vectors.top_k(vectors.matrix_for(collection), [1, 0], 1)
    assert (exc.value.status, exc.value.code) == (409, "reindex_required")


def test_mixed_vector_sizes_ask_for_a_reindex(collection):
    add_chunks(collection, [[1, 0, 0], [1, 0]])
    with pytest.raises(ApiError) as exc:
        vectors.matrix_for(collection)
    assert exc.value.code == "reindex_required"


# --- extraction ----------------------------------------------------------------------------------


@pytest.mark.parametrize("declared, filename, expected", [
    ("text/plain; charset=utf-8", "a.bin", "text/plain"),
    ("TEXT/MARKDOWN", "", "text/markdown"),
    ("text/x-markdown", "", "text/markdown"),
    ("application/octet-stream", "notes.MD", "text/markdown"),
    ("", "page.htm", "text/html"),
    (None, "paper.pdf", "application/pdf"),
])
def test_content_types_are_recognised(declared, filename, expected):
    assert extract.content_type_of(declared, filename) == expected


@pytest.mark.parametrize("declared, filename", [("image/png", "a.png"), ("application/octet-stream", "a.exe"),
                                                (None, "noextension"), ("application/json", "a.txt")])
def test_other_content_types_are_415(declared, filename):
    with pytest.raises(ApiError) as exc:
        extract.content_type_of(declared, filename)
    assert (exc.value.status, exc.value.code) == (415, "unsupported_media_type")


def test_html_keeps_the_visible_text_in_paragraphs():
    html = ("<html><head><title>T</title><script>hidden()</script></head><body><p>One &amp; two</p>"
            "<ul><li>a</li><li>b</li></ul><style>.x{}</style>tail</body></html>")
    assert extract.tidy(extract.html_text(html)) == "T\n\nOne & two\n\na\n\nb\n\ntail"


def test_text_is_decoded_with_its_charset_or_as_latin1():
    assert extract.extract_text("café".encode("utf-16"), extract.TEXT, charset="utf-16") == "café"
    assert extract.extract_text("café".encode("latin-1"), extract.TEXT) == "café"
    assert extract.extract_text(b"  a \t b \n\n\n\n c ", extract.TEXT) == "a b\n\nc"


def test_nothing_to_extract_is_422():
    with pytest.raises(ValidationFailed):
        extract.extract_text(b" \n ", extract.TEXT)


# --- chunking ------------------------------------------------------------------------------------


def test_short_text_is_one_chunk():
    assert chunk_text("one short paragraph", size=100, overlap=10) == ["one short paragraph"]
    assert chunk_text("", size=100, overlap=10) == []


def test_chunks_cut_at_breaks_and_overlap():
    text = " ".join(f"word{i:03d}" for i in range(300))  # 2399 characters
    chunks = chunk_text(text, size=200, overlap=50)
    assert all(len(c) <= 200 for c in chunks)
    assert all(c.startswith("word") and c[-1].isdigit() for c in chunks)  # no word cut in two
    for before, after in zip(chunks, chunks[1:]):
        assert before.split()[-1] in after.split()[:8]  # the end of one chunk starts the next
    assert chunks[0].split()[0] == "word000" and chunks[-1].split()[-1] == "word299"


def test_a_paragraph_break_is_preferred():
    text = "a" * 120 + "\n\n" + "b" * 60 + ". " + "c" * 100
    assert chunk_text(text, size=200, overlap=0)[0] == "a" * 120


def test_text_without_breaks_is_cut_at_the_size():
    chunks = chunk_text("x" * 450, size=200, overlap=20)
    assert [len(c) for c in chunks] == [200, 200, 90]


def test_the_overlap_must_be_smaller_than_the_size():
    with pytest.raises(ValueError):
        chunk_text("text", size=10, overlap=10)


# --- the operator console ----------------------------------------------------------------------


@pytest.fixture
def admin_client(client, db):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    return client


def test_the_admin_lists_collections_and_shows_a_document(admin_client, collection):
    add_chunks(collection, [[1, 0]])
    page = admin_client.get("/admin/native/collection/")
    assert page.status_code == 200 and b">c<" in page.content
    assert admin_client.get(f"/admin/native/collection/{collection.pk}/change/").status_code == 200
    assert admin_client.get(f"/admin/native/document/{Document.objects.get().pk}/change/").status_code == 200
    assert admin_client.get("/admin/native/document/add/").status_code == 403


def test_a_document_deleted_in_the_admin_refreshes_the_vectors(admin_client, collection):
    add_chunks(collection, [[1, 0]])
    assert len(vectors.matrix_for(collection).ids) == 1
    document = Document.objects.get()
    r = admin_client.post(f"/admin/native/document/{document.pk}/delete/", {"post": "yes"})
    assert r.status_code == 302
    collection.refresh_from_db()
    assert collection.vectors_version == 1
    assert len(vectors.matrix_for(collection).ids) == 0
