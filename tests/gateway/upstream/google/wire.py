"""What the fake Google answers a Gemini model: GenerateContentResponse chunks as streamGenerateContent streams
them, the whole response generateContent gives, embeddings, and the Gemini API's model listing."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.upstream.core import default_reply, limit_tokens, split_tokens

GEMINI_API_MODELS = [
    {"name": "models/gemini-2.5-flash", "supportedGenerationMethods": ["generateContent", "countTokens"]},
    {"name": "models/gemini-2.5-pro", "supportedGenerationMethods": ["generateContent", "countTokens",
                                                                     "createCachedContent"]},
    {"name": "models/gemini-embedding-001", "supportedGenerationMethods": ["embedContent", "countTextTokens"]},
    {"name": "models/imagen-4.0-generate-001", "supportedGenerationMethods": ["predict"]},
    {"name": "models/aqa", "supportedGenerationMethods": ["generateAnswer"]},
]
# Model Garden's Google models: Gemini and the embedding models are called by name; the others are deployed first
VERTEX_GOOGLE_MODELS = [{"name": f"publishers/google/models/{name}", "versionId": "001", "launchStage": "GA"}
                        for name in ("gemini-2.5-pro", "gemini-2.5-flash", "text-embedding-005",
                                     "gemini-embedding-001", "imagen-4.0-generate-001", "gemma3", "chirp-2")]
PROMPT_TOKENS = 4


def embedding(text: str) -> list[float]:
    """The fake's vector of a text: its length and two fixed numbers (so a test can tell texts apart)."""
    return [float(len(text)), 0.5, -0.25]


def _last_user_text(body: dict[str, Any]) -> str:
    contents = body.get("contents") or [{}]
    users = [c for c in contents if isinstance(c, dict) and c.get("role", "user") == "user"] or [{}]
    return " ".join(part.get("text", "") for part in users[-1].get("parts") or [] if isinstance(part, dict))


def _function(body: dict[str, Any], knobs: dict[str, Any]) -> str | None:
    """The function the model calls: with functions offered (and the last turn the user's text), the `tool_name`
    knob, else the first offered."""
    declared = [d for tool in body.get("tools") or [] if isinstance(tool, dict)
                for d in tool.get("functionDeclarations") or [] if isinstance(d, dict)]
    last = (body.get("contents") or [{}])[-1]
    if not declared or any("functionResponse" in p for p in last.get("parts") or [] if isinstance(p, dict)):
        return None
    mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
    return None if mode == "NONE" else knobs["tool_name"] or declared[0].get("name")


def _usage(candidates: int, thoughts: int = 0) -> dict[str, Any]:
    usage = {"promptTokenCount": PROMPT_TOKENS, "candidatesTokenCount": candidates,
             "totalTokenCount": PROMPT_TOKENS + candidates + thoughts}
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


def generate(body: dict[str, Any], model: str, knobs: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks of a reply: one per word of the echo (or one function call), the last with the finish reason
    and the usage."""
    response_id = uuid.uuid4().hex[:20]
    base = {"modelVersion": model, "responseId": response_id}
    if knobs.get("block_reason"):
        return [{"promptFeedback": {"blockReason": knobs["block_reason"]}, "usageMetadata": _usage(0), **base}]
    if function := _function(body, knobs):
        arguments = knobs["tool_arguments"]
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
        part = {"functionCall": {"name": function, "args": args}}
        return [{"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": _usage(1), **base}]
    config = body.get("generationConfig") or {}
    tokens, truncated = limit_tokens(split_tokens(default_reply(knobs, _last_user_text(body))),
                                     config.get("maxOutputTokens"))
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": token}]}, "index": 0}],
               "usageMetadata": _usage(0), **base} for token in tokens]
    last = {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                            "finishReason": "MAX_TOKENS" if truncated else "STOP", "index": 0}],
            "usageMetadata": _usage(len(tokens)), **base}
    return [*chunks, last]


def whole(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """generateContent's one response for the same reply."""
    if "candidates" not in chunks[-1]:  # the prompt blocked: its one chunk is the response
        return chunks[-1]
    parts = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"] if part != {"text": ""}]
    text = "".join(part.get("text", "") for part in parts)
    merged = [{"text": text}] if text else [part for part in parts if "functionCall" in part]
    last = chunks[-1]
    return {"candidates": [{"content": {"role": "model", "parts": merged},
                            "finishReason": last["candidates"][0]["finishReason"], "index": 0}],
            "usageMetadata": last["usageMetadata"], "modelVersion": last["modelVersion"],
            "responseId": last["responseId"]}


def sse(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\r\n\r\n"


def embed(body: dict[str, Any], method: str) -> dict[str, Any]:
    if method == "predict":  # Vertex AI: instances of {content}
        return {"predictions": [{"embeddings": {"values": embedding(instance.get("content", "")),
                                                "statistics": {"token_count": len(instance.get("content", "")
                                                                                   .split()), "truncated": False}}}
                                for instance in body.get("instances") or []]}
    requests = body.get("requests") if method == "batchEmbedContents" else [body]
    texts = [" ".join(p.get("text", "") for p in (r.get("content") or {}).get("parts") or []) for r in requests or []]
    if method == "embedContent":
        return {"embedding": {"values": embedding(texts[0] if texts else "")}}
    return {"embeddings": [{"values": embedding(text)} for text in texts]}
