"""Reading a model server's Server-Sent Events, however the bytes are split."""

import asyncio

import pytest

from gateway.upstream.sse import sse_read

STREAM = (b'data: {"a":1}\n\n'
          b"event: message_start\ndata: {\"type\":\"message_start\"}\n\n"
          b": a comment\n\n"
          b"data: line one\ndata: line two\n\n"
          b"id: 7\nretry: 10\ndata:no-space\n\n"
          b"data: [DONE]\n\n")
EXPECTED = [(None, '{"a":1}'), ("message_start", '{"type":"message_start"}'), (None, "line one\nline two"),
            (None, "no-space"), (None, "[DONE]")]


def read(pieces):
    async def gen():
        for piece in pieces:
            yield piece

    async def collect():
        return [event async for event in sse_read(gen())]

    return asyncio.run(collect())


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(STREAM)])
def test_it_reads_events_whatever_the_split(size):
    assert read([STREAM[i:i + size] for i in range(0, len(STREAM), size)]) == EXPECTED


def test_it_reads_crlf_streams_and_a_last_event_without_its_blank_line():
    crlf = STREAM.replace(b"\n", b"\r\n")
    for size in (1, 2, 5):
        assert read([crlf[i:i + size] for i in range(0, len(crlf), size)]) == EXPECTED
    assert read([b'data: {"a":1}\n\ndata: tail']) == [(None, '{"a":1}'), (None, "tail")]


def test_it_decodes_utf8_split_across_pieces():
    text = "data: ümlaut €\n\n".encode()
    assert read([text[:8], text[8:]]) == [(None, "ümlaut €")]
