"""Cutting a document's text into overlapping chunks of characters for embedding.

A chunk holds at most `size` characters. It ends at the best break in its second half — a
paragraph, else a line or sentence end, else a space — so words are rarely cut, and the next
chunk starts `overlap` characters before that end (moved forward to the start of a word; never
more than half the chunk back, so the text always advances), so a passage that straddles a cut
is still whole in one of the two chunks.
"""

from __future__ import annotations

from django.conf import settings

BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", " ")


def chunk_text(text: str, *, size: int | None = None, overlap: int | None = None) -> list[str]:
    size = size or settings.COLLECTION_CHUNK_CHARS
    overlap = settings.COLLECTION_CHUNK_OVERLAP if overlap is None else overlap
    if not 0 <= overlap < size:
        raise ValueError("overlap must be at least 0 and less than size")
    text = text.strip()
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            end = _break_before(text, start, end)
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        start = _word_start(text, max(end - overlap, start + max((end - start) // 2, 1)), end)
    return chunks


def _break_before(text: str, start: int, end: int) -> int:
    """The end of the chunk: just after the best break in (start + half, end], else `end`."""
    floor = start + (end - start) // 2
    for mark in BREAKS:
        at = text.rfind(mark, floor, end)
        if at != -1:
            return at + len(mark)
    return end


def _word_start(text: str, position: int, end: int) -> int:
    """`position`, moved forward to the start of the next word when it falls inside one; kept
    when that word would start past `end` (a text without spaces)."""
    if position == 0 or text[position - 1].isspace():
        return position
    at = position
    while at < end and not text[at].isspace():
        at += 1
    if at >= end:
        return position
    while at < end and text[at].isspace():
        at += 1
    return at
