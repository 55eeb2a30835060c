"""A collection's vectors as one numpy float32 matrix, L2-normalised, kept per process.

Chunks store their embedding as little-endian float32 bytes, normalised when written, so a dot
product is the cosine similarity. The matrix is read from the database on first use and kept
under the collection's `vectors_version`, which every write, delete and reindex moves on in the
same transaction as the change: a process that reads a newer version than the one it keeps
refreshes its matrix, so a change made in any process is seen by the next search everywhere.

A write only adds chunks, so the refresh reads just the chunks past the last id kept and appends
them (into spare rows, so appending rarely copies the matrix). A change to stored vectors — a
document deleted, a reindex — also moves `vectors_generation` on, and the matrix is read again
whole. Appending by id is sound because a write holds the collection's row lock from before its
chunks get their ids until it commits, so a collection's chunks are committed in id order.
The same code runs on SQLite and PostgreSQL (no vector extension).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from django.conf import settings

from gateway.web.errors import ApiError
from native.models import Chunk

DTYPE = np.dtype("<f4")


@dataclass
class _Buffer:
    rows: np.ndarray  # (capacity, dim) float32
    filled: int  # rows written so far; rows past it belong to no matrix yet


@dataclass(frozen=True)
class Matrix:
    version: int
    ids: np.ndarray  # chunk ids, int64, ascending, one per row
    vectors: np.ndarray  # (rows, dim) float32, rows of length 1 (or 0 for an all-zero vector)
    generation: int = 0
    spare: _Buffer | None = None  # the buffer `vectors` is the start of, with room to append

    @property
    def nbytes(self) -> int:
        return (self.spare.rows.nbytes if self.spare is not None else self.vectors.nbytes) + self.ids.nbytes

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    @property
    def last_id(self) -> int:
        return int(self.ids[-1]) if len(self.ids) else 0


_lock = threading.Lock()
_cache: OrderedDict[int, Matrix] = OrderedDict()


def normalized(vectors) -> np.ndarray:
    """Rows scaled to length 1 (all-zero rows stay zero), as float32."""
    matrix = np.array(vectors, dtype=np.float32)  # a copy: normalised in place below
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


def to_blobs(vectors) -> list[bytes]:
    """What a chunk stores: its vector, normalised, as little-endian float32 bytes."""
    return [row.tobytes() for row in normalized(vectors).astype(DTYPE, copy=False)]


def matrix_for(collection) -> Matrix:
    """The collection's matrix at `collection.vectors_version` (or newer): this process's copy
    when it is that recent, else the copy with the chunks written since appended, else read anew."""
    with _lock:
        cached = _cache.get(collection.pk)
        if cached is not None and cached.version >= collection.vectors_version:
            _cache.move_to_end(collection.pk)
            return cached
    if cached is not None and cached.generation == collection.vectors_generation and len(cached.ids):
        matrix = _appended(cached, collection)
    else:
        matrix = load(collection.pk, version=collection.vectors_version, generation=collection.vectors_generation)
    remember(collection.pk, matrix)
    return matrix


def load(collection_id: int, *, version: int, generation: int = 0) -> Matrix:
    """Read every chunk vector of a collection (ordered by chunk id)."""
    ids, vectors = _read(collection_id)
    return Matrix(version, ids, vectors, generation)


def _read(collection_id: int, after_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rows = (Chunk.objects.filter(collection_id=collection_id, id__gt=after_id).order_by("id")
            .values_list("id", "embedding"))
    ids: list[int] = []
    blobs: list[bytes] = []
    for chunk_id, blob in rows.iterator(chunk_size=2000):
        ids.append(chunk_id)
        blobs.append(blob)
    if not ids:
        return np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.float32)
    width = len(blobs[0])
    if width == 0 or width % DTYPE.itemsize or any(len(b) != width for b in blobs):
        raise _mixed_sizes()
    vectors = np.frombuffer(b"".join(blobs), dtype=DTYPE).reshape(len(ids), width // DTYPE.itemsize)
    return np.asarray(ids, dtype=np.int64), vectors


def _appended(cached: Matrix, collection) -> Matrix:
    """`cached` with the chunks written after its last id (a write only adds chunks)."""
    ids, new = _read(collection.pk, after_id=cached.last_id)
    version, generation = collection.vectors_version, collection.vectors_generation
    if not len(ids):
        return Matrix(version, cached.ids, cached.vectors, generation, cached.spare)
    if new.shape[1] != cached.dim:
        raise _mixed_sizes()
    rows, total = len(cached.ids), len(cached.ids) + len(ids)
    with _lock:
        spare = cached.spare
        # Write into the spare rows only when no other matrix has taken them meanwhile.
        if spare is None or spare.filled != rows or len(spare.rows) < total:
            spare = _Buffer(np.empty((max(total + total // 4, 1024), cached.dim), dtype=np.float32), rows)
            spare.rows[:rows] = cached.vectors
        spare.rows[rows:total] = new
        spare.filled = total
    return Matrix(version, np.concatenate([cached.ids, ids]), spare.rows[:total], generation, spare)


def _mixed_sizes() -> ApiError:
    return ApiError(409, "The collection holds vectors of different sizes; reindex it.", code="reindex_required")


def remember(collection_id: int, matrix: Matrix) -> None:
    """Keep a matrix, dropping the least recently used ones beyond COLLECTION_VECTOR_CACHE_MB.
    A matrix larger than the whole budget is used but not kept."""
    budget = settings.COLLECTION_VECTOR_CACHE_MB * 1024 * 1024
    if matrix.nbytes > budget:
        forget(collection_id)
        return
    with _lock:
        current = _cache.get(collection_id)
        if current is not None and current.version > matrix.version:
            return  # another thread already keeps a newer one
        _cache[collection_id] = matrix
        _cache.move_to_end(collection_id)
        total = sum(m.nbytes for m in _cache.values())
        while total > budget and len(_cache) > 1:
            _, dropped = _cache.popitem(last=False)
            total -= dropped.nbytes


def forget(collection_id: int | None = None) -> None:
    """Drop one collection's matrix (or all) from this process."""
    with _lock:
        if collection_id is None:
            _cache.clear()
        else:
            _cache.pop(collection_id, None)


def top_k(matrix: Matrix, query, k: int) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) of the `k` closest rows, best first (ties: lower id first)."""
    rows = len(matrix.ids)
    if rows == 0 or k <= 0:
        return []
    q = normalized(query)[0]
    if q.shape[0] != matrix.dim:
        raise ApiError(409, f"The query vector has {q.shape[0]} dimensions but the collection's have "
                            f"{matrix.dim}; reindex the collection.", code="reindex_required")
    scores = matrix.vectors @ q
    if k < rows:
        best = np.argpartition(-scores, k - 1)[:k]
    else:
        best = np.arange(rows)
    order = best[np.lexsort((matrix.ids[best], -scores[best]))]
    return [(int(matrix.ids[i]), float(scores[i])) for i in order]
