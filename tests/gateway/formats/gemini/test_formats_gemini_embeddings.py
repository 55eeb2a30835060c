"""Google's embedding calls (gateway.formats.gemini.embeddings): the bodies google-genai's client sends
for the same texts (the Gemini API's batchEmbedContents, Vertex AI's predict), and the replies, as the
SDK reads them too, in OpenAI's embeddings shape."""

import json

import httpx
import pytest
from google.genai import types
from openai.types import CreateEmbeddingResponse

from gateway.formats.gemini import embed_request, embeddings_reply
from gateway.web.errors import ApiError
from tests.gateway.formats.gemini.support import google_client

GEMINI_REPLY = {"embeddings": [{"values": [0.1, -0.2]}, {"values": [0.3, 0.4]}]}
VERTEX_REPLY = {"predictions": [{"embeddings": {"values": [0.1, -0.2], "statistics": {"token_count": 2,
                                                                                    "truncated": False}}},
                                {"embeddings": {"values": [0.3, 0.4], "statistics": {"token_count": 3.0,
                                                                                    "truncated": False}}}],
                "metadata": {"billableCharacterCount": 9}}


def sent_by_google_genai(model, texts, *, vertex, dimensions=None, reply=None):
    """(the body google-genai sends to embed `texts`, the path, what it reads from `reply`)."""
    sent = []

    def handler(request):
        sent.append((request.url.path, json.loads(request.content)))
        return httpx.Response(200, json=reply or (VERTEX_REPLY if vertex else GEMINI_REPLY))

    config = types.EmbedContentConfig(output_dimensionality=dimensions) if dimensions else None
    read = google_client(handler, vertex=vertex).models.embed_content(model=model, contents=texts, config=config)
    return sent[0][1], sent[0][0], read


@pytest.mark.parametrize("dimensions", [None, 256])
def test_the_gemini_api_s_batch_body(dimensions):
    body, path, read = sent_by_google_genai("gemini-embedding-001", ["a", "b"], vertex=False, dimensions=dimensions)
    assert path.endswith("/models/gemini-embedding-001:batchEmbedContents")
    assert embed_request(["a", "b"], model="gemini-embedding-001", vertex=False, dimensions=dimensions) == body
    reply = embeddings_reply(GEMINI_REPLY, model="gem/embed", vertex=False)
    CreateEmbeddingResponse.model_validate({**reply, "usage": {"prompt_tokens": 0, "total_tokens": 0}})
    assert reply == {"object": "list", "model": "gem/embed",
                     "data": [{"object": "embedding", "index": i, "embedding": embedding.values}
                              for i, embedding in enumerate(read.embeddings)]}


@pytest.mark.parametrize("dimensions", [None, 256])
def test_vertex_s_predict_body(dimensions):
    body, path, read = sent_by_google_genai("text-embedding-005", ["a", "b"], vertex=True, dimensions=dimensions)
    assert path.endswith("/publishers/google/models/text-embedding-005:predict")
    assert embed_request(["a", "b"], model="text-embedding-005", vertex=True, dimensions=dimensions) == body
    reply = embeddings_reply(VERTEX_REPLY, model="gcp/embed", vertex=True)
    CreateEmbeddingResponse.model_validate(reply)
    assert reply["data"] == [{"object": "embedding", "index": i, "embedding": embedding.values}
                             for i, embedding in enumerate(read.embeddings)]
    assert reply["usage"] == {"prompt_tokens": 5, "total_tokens": 5}
    assert sum(embedding.statistics.token_count for embedding in read.embeddings) == 5


def test_a_count_gemini_gives_is_the_usage():
    reply = embeddings_reply({**GEMINI_REPLY, "usageMetadata": {"promptTokenCount": 4}}, model="m", vertex=False)
    assert reply["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    partial = {"predictions": [VERTEX_REPLY["predictions"][0], {"embeddings": {"values": [0.5]}}]}
    assert "usage" not in embeddings_reply(partial, model="m", vertex=True)  # counted by the gateway instead


def test_a_model_given_by_its_resource_name():
    assert embed_request(["a"], model="models/text-embedding-004", vertex=False) == {
        "requests": [{"model": "models/text-embedding-004", "content": {"parts": [{"text": "a"}], "role": "user"}}]}


@pytest.mark.parametrize(("texts", "dimensions", "message"), [
    ([], None, "input: one or more texts are required."), ([1], None, "input: one or more texts are required."),
    (["a"], 0, "dimensions: must be a positive integer."),
])
def test_bad_input_is_refused(texts, dimensions, message):
    with pytest.raises(ApiError) as refused:
        embed_request(texts, model="m", vertex=False, dimensions=dimensions)
    assert refused.value.message == message


@pytest.mark.parametrize(("reply", "vertex"), [
    ([], False), ({"embeddings": []}, False), ({"embeddings": [{"values": []}]}, False),
    ({"embeddings": [{"values": ["x"]}]}, False), ({"predictions": []}, True), ({"predictions": [{}]}, True),
    ({"predictions": [{"embeddings": {"values": [True]}}]}, True),
])
def test_a_reply_google_does_not_send_is_bad(reply, vertex):
    with pytest.raises(ValueError):
        embeddings_reply(reply, model="m", vertex=vertex)
