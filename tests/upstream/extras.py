"""Embeddings, audio and model listings (OpenAI, Anthropic and Ollama shapes)."""

from __future__ import annotations

import base64
import functools
import hashlib
import math
import re
import struct
from typing import Any

from .core import ClientError, Reply, count_words, dumps, json_reply

CREATED = 1_700_000_000  # a fixed "created" time for listed models

# ---- embeddings --------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


@functools.lru_cache(maxsize=65536)
def _bucket(word: str, dim: int) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little") % dim


def embed(text: str, dim: int) -> list[float]:
    """Hashed bag of words, L2-normalised: texts sharing words point the same way."""
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        vec[_bucket(word, dim)] += 1.0
    norm = math.sqrt(sum(v * v for v in vec))
    return [v / norm for v in vec] if norm else vec


def _inputs(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value:
        if all(isinstance(v, str) for v in value):
            return value
        if all(isinstance(v, int) for v in value):  # one input given as token ids
            return [" ".join(map(str, value))]
        if all(isinstance(v, list) and all(isinstance(i, int) for i in v) for v in value):
            return [" ".join(map(str, v)) for v in value]
    raise ClientError(400, "'input' must be a string, a list of strings, or token arrays", "input")


def embeddings(body: Any, knobs: dict[str, Any]) -> Reply:
    if not isinstance(body, dict) or not body.get("model"):
        raise ClientError(400, "you must provide a model parameter", "model")
    texts = _inputs(body.get("input"))
    dim = body.get("dimensions") or knobs["embedding_dim"]
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ClientError(400, "'dimensions' must be a positive integer", "dimensions")
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vec = embed(text, dim)
        value: Any = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode() if as_base64 else vec
        data.append({"object": "embedding", "index": index, "embedding": value})
    obj: dict[str, Any] = {"object": "list", "data": data, "model": body["model"]}
    if knobs["usage"]:
        words = sum(count_words(t) for t in texts)
        obj["usage"] = {"prompt_tokens": words, "total_tokens": words}
    return json_reply(obj)


# ---- audio -------------------------------------------------------------------------------------

def parse_multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """multipart/form-data -> {field name: (filename or None, raw value)}."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if not content_type.startswith("multipart/form-data") or not match:
        raise ClientError(400, "the body must be multipart/form-data")
    fields = {}
    delimiter = b"--" + match.group(1).encode("latin-1")
    for part in body.split(delimiter)[1:]:
        if part.startswith(b"--"):  # the closing delimiter
            break
        head, _, value = part.partition(b"\r\n\r\n")
        value = value[:-2] if value.endswith(b"\r\n") else value
        disposition = next((line for line in head.decode("utf-8", "replace").split("\r\n")
                            if line.lower().startswith("content-disposition:")), "")
        name = re.search(r'\bname="([^"]*)"', disposition)
        filename = re.search(r'\bfilename="([^"]*)"', disposition)
        if name:
            fields[name.group(1)] = (filename.group(1) if filename else None, value)
    return fields


def transcription(content_type: str, body: bytes, task: str) -> Reply:
    fields = parse_multipart(content_type, body)
    if "file" not in fields:
        raise ClientError(400, "'file' is a required property", "file")
    if not fields.get("model", (None, b""))[1]:
        raise ClientError(400, "you must provide a model parameter", "model")
    filename, data = fields["file"]
    text = f"transcribed {len(data)} bytes of {filename or 'file'}"
    response_format = fields.get("response_format", (None, b"json"))[1].decode() or "json"
    if response_format in ("text", "srt", "vtt"):
        return Reply(text.encode(), content_type=b"text/plain; charset=utf-8")
    if response_format == "verbose_json":
        return json_reply({"task": task, "language": "english", "duration": 1.0, "text": text, "segments": []})
    return json_reply({"text": text})


def wav_silence(characters: int) -> bytes:
    """A valid 16-bit mono 8 kHz WAV of silence, 20 ms per input character."""
    frames = 160 * max(characters, 1)
    data_size = frames * 2
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + data_size, b"WAVE", b"fmt ", 16, 1, 1, 8000, 16000, 2,
                         16, b"data", data_size)
    return header + bytes(data_size)


def speech(body: Any, knobs: dict[str, Any]) -> Reply:
    if not isinstance(body, dict) or not isinstance(body.get("input"), str):
        raise ClientError(400, "'input' is a required property", "input")
    if not body.get("model") or not body.get("voice"):
        raise ClientError(400, "'model' and 'voice' are required", "voice")
    return Reply(wav_silence(len(body["input"])), content_type=b"audio/wav")


# ---- model listings ----------------------------------------------------------------------------

def openai_models(knobs: dict[str, Any]) -> Reply:
    return json_reply({"object": "list", "data": [_openai_model(m) for m in knobs["models"]]})


def _openai_model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": "upstream"}


def openai_model(knobs: dict[str, Any], name: str) -> Reply:
    if name not in knobs["models"]:
        raise ClientError(404, f"The model '{name}' does not exist", "model")
    return json_reply(_openai_model(name))


def anthropic_models(knobs: dict[str, Any]) -> Reply:
    data = [{"type": "model", "id": m, "display_name": m, "created_at": "2024-01-01T00:00:00Z",
             "lifecycle": "active"} for m in knobs["models"]]
    return json_reply({"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                       "last_id": data[-1]["id"] if data else None})


def ollama_tags(knobs: dict[str, Any]) -> Reply:
    models = [{"name": m, "model": m, "modified_at": "2024-01-01T00:00:00Z", "size": 1_000_000,
               "digest": hashlib.sha256(m.encode()).hexdigest(),
               "details": {"parent_model": "", "format": "gguf", "family": "echo", "families": ["echo"],
                           "parameter_size": "1M", "quantization_level": "Q8_0"}} for m in knobs["models"]]
    return Reply(dumps({"models": models}).encode())
