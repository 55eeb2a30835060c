"""Google's text embedding calls, and their replies as an OpenAI embeddings reply body (`{"object":
"list", "data": [...], "model", "usage"}`), which gateway/calls/embeddings.py reads for every kind of
server.

- The Gemini API: `models/{model}:batchEmbedContents`, `{"requests": [{"model": "models/<m>",
  "content": {"parts": [{"text"}], "role": "user"}}]}` → `{"embeddings": [{"values": [...]}]}`, with
  `usageMetadata` where the API counts the tokens (else no `usage`, and gateway/calls/embeddings.py
  counts the texts itself).
- Vertex AI: `publishers/google/models/{model}:predict`, `{"instances": [{"content"}]}` →
  `{"predictions": [{"embeddings": {"values": [...], "statistics": {"token_count"}}}]}`.

`dimensions` becomes `outputDimensionality` in both. Each body is the one google-genai sends for the
same texts (on Vertex, for the models it sends to `predict`: it sends Gemini embedding models to
Vertex's batchEmbedContents, though `predict` takes them too, one text a call). A reply that is not
what Google sends raises ValueError, which the provider reads as a bad reply."""

from __future__ import annotations

from typing import Any

from gateway.formats.anthropic.to_chat import bad_request
from gateway.formats.converse.embeddings import openai_embeddings_reply


def embed_request(texts: list[str], *, model: str, vertex: bool, dimensions: int | None = None) -> dict:
    """The body embedding `texts` with `model`: Vertex's predict, or the Gemini API's batchEmbedContents."""
    if not texts or not all(isinstance(text, str) for text in texts):
        raise bad_request("input: one or more texts are required.")
    if dimensions is not None and (not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1):
        raise bad_request("dimensions: must be a positive integer.")
    if vertex:
        body: dict[str, Any] = {"instances": [{"content": text} for text in texts]}
        if dimensions is not None:
            body["parameters"] = {"outputDimensionality": dimensions}
        return body
    name = model if model.startswith("models/") else f"models/{model}"
    requests = []
    for text in texts:
        request: dict[str, Any] = {"model": name, "content": {"parts": [{"text": text}], "role": "user"}}
        if dimensions is not None:
            request["outputDimensionality"] = dimensions
        requests.append(request)
    return {"requests": requests}


def embeddings_reply(data: Any, *, model: str, vertex: bool) -> dict:
    """The OpenAI embeddings reply of Google's reply to `embed_request`."""
    if not isinstance(data, dict):
        raise ValueError("A Google embeddings reply is a JSON object.")
    if vertex:
        predictions = data.get("predictions")
        if not isinstance(predictions, list) or not predictions:
            raise ValueError("A Vertex AI embeddings reply has predictions.")
        vectors, counts = [], []
        for prediction in predictions:
            embedding = prediction.get("embeddings") if isinstance(prediction, dict) else None
            if not isinstance(embedding, dict):
                raise ValueError("A Vertex AI prediction has its embeddings.")
            vectors.append(_vector(embedding.get("values")))
            statistics = embedding.get("statistics")
            count = statistics.get("token_count") if isinstance(statistics, dict) else None
            if isinstance(count, float) and count.is_integer():  # a Struct's number, which may come as 5.0
                count = int(count)
            counts.append(count if _count(count) else None)
        tokens = sum(counts) if all(count is not None for count in counts) else None  # type: ignore[misc]
        return openai_embeddings_reply(vectors, model=model, prompt_tokens=tokens)
    embeddings = data.get("embeddings")
    if not isinstance(embeddings, list) or not embeddings:
        raise ValueError("A Gemini API embeddings reply has embeddings.")
    vectors = [_vector(embedding.get("values") if isinstance(embedding, dict) else None) for embedding in embeddings]
    usage = data.get("usageMetadata")
    count = usage.get("promptTokenCount") if isinstance(usage, dict) else None
    return openai_embeddings_reply(vectors, model=model, prompt_tokens=count if _count(count) else None)


def _vector(value: Any) -> list[float]:
    if not isinstance(value, list) or not value or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise ValueError("An embedding is a non-empty list of numbers.")
    return value


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
