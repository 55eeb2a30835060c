"""Bedrock's binary event stream (`application/vnd.amazon.eventstream`) written as AWS writes it, for the fake
Bedrock: each message a prelude (total length, headers length, the prelude's CRC32), headers (name, type 7 for a
string, value), the payload and the message's CRC32. botocore's parser reads it (the gateway's, boto3's) and so
does the anthropic SDK's Bedrock client: both check the CRCs, so a mistake here fails their tests."""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import Any

STRING = 7


def _headers(headers: dict[str, str]) -> bytes:
    out = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", STRING, len(raw_value)) + raw_value
    return out


def message(headers: dict[str, str], payload: bytes) -> bytes:
    encoded = _headers(headers)
    total = 4 + 4 + 4 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + encoded + payload
    return body + struct.pack("!I", binascii.crc32(body) & 0xFFFFFFFF)


def event(event_type: str, payload: Any) -> bytes:
    """An event frame: its JSON payload."""
    return message({":event-type": event_type, ":content-type": "application/json", ":message-type": "event"},
                   json.dumps(payload, separators=(",", ":")).encode())


def chunk(anthropic_event: dict[str, Any]) -> bytes:
    """InvokeModelWithResponseStream's chunk: one Messages event, base64 JSON in `bytes`."""
    data = base64.b64encode(json.dumps(anthropic_event, separators=(",", ":")).encode()).decode()
    return event("chunk", {"bytes": data})


def exception(exception_type: str, text: str) -> bytes:
    """An exception frame, as Bedrock ends a stream that failed midway."""
    return message({":exception-type": exception_type, ":content-type": "application/json",
                    ":message-type": "exception"}, json.dumps({"message": text}).encode())
