"""Bedrock's embedding models (gateway.formats.converse.embeddings): the InvokeModel bodies of Titan Text
Embeddings and Cohere Embed, and their replies as the OpenAI embeddings reply that
gateway/calls/embeddings.py reads (checked by its own reader, and by the OpenAI SDK's type when the
reply has a token count)."""

import pytest
from openai.types import CreateEmbeddingResponse

from gateway.calls.embeddings import _vectors_of
from gateway.formats.converse.embeddings import (
    COHERE,
    TITAN,
    cohere_embedding_request,
    cohere_embeddings_reply,
    embedding_family,
    openai_embeddings_reply,
    titan_embedding_request,
    titan_embeddings_reply,
)
from gateway.web.errors import ApiError


def read(reply, count):
    """The vectors gateway/calls/embeddings.py takes from `reply` (None: it would refuse the reply)."""
    if "usage" in reply:
        CreateEmbeddingResponse.model_validate(reply)
    return _vectors_of(reply, count)


@pytest.mark.parametrize(("model_id", "kind"), [
    ("amazon.titan-embed-text-v2:0", TITAN), ("amazon.titan-embed-text-v1", TITAN),
    ("cohere.embed-english-v3", COHERE), ("us.cohere.embed-v4:0", COHERE), ("amazon.nova-pro-v1:0", None),
    (None, None)])
def test_the_embedding_family(model_id, kind):
    assert embedding_family(model_id) == kind


def test_titan_one_text_a_call():
    assert titan_embedding_request("Hello") == {"inputText": "Hello"}
    assert titan_embedding_request("Hello", dimensions=512) == {"inputText": "Hello", "dimensions": 512}
    with pytest.raises(ApiError):
        titan_embedding_request("Hello", dimensions=300)


def test_titan_replies_become_one_openai_reply():
    replies = [{"embedding": [0.1, 0.2], "inputTextTokenCount": 3, "embeddingsByType": {"float": [0.1, 0.2]}},
               {"embedding": [0.3, -0.4], "inputTextTokenCount": 5}]
    reply = titan_embeddings_reply(replies, model="bedrock/titan")
    assert reply == {"object": "list", "model": "bedrock/titan",
                     "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]},
                              {"object": "embedding", "index": 1, "embedding": [0.3, -0.4]}],
                     "usage": {"prompt_tokens": 8, "total_tokens": 8}}
    assert read(reply, 2) == [[0.1, 0.2], [0.3, -0.4]]
    uncounted = titan_embeddings_reply([{"embedding": [1.0]}, {"embedding": [2.0], "inputTextTokenCount": 1}],
                                       model="m")
    assert "usage" not in uncounted and read(uncounted, 2) == [[1.0], [2.0]]


@pytest.mark.parametrize("reply", [[], {"embedding": []}, {"embedding": [1.0, "x"]}, {"embedding": [float("nan")]},
                                   {"embedding": [True]}, {"vector": [1.0]}])
def test_a_titan_reply_that_is_not_one_is_refused(reply):
    with pytest.raises(ValueError):
        titan_embeddings_reply([reply], model="m")


def test_cohere_texts_in_one_call():
    assert cohere_embedding_request(["a", "b"]) == {"texts": ["a", "b"], "input_type": "search_document"}
    assert cohere_embedding_request(["a"], input_type="search_query", dimensions=1024) == {
        "texts": ["a"], "input_type": "search_query", "output_dimension": 1024}
    for texts in ([], ["x"] * 97):
        with pytest.raises(ApiError):
            cohere_embedding_request(texts)
    with pytest.raises(ApiError):
        cohere_embedding_request(["a"], dimensions=100)


def test_cohere_replies_floats_or_by_type_counted_by_the_header():
    floats = {"id": "e1", "response_type": "embeddings_floats", "texts": ["a", "b"],
              "embeddings": [[0.1, 0.2], [0.3, 0.4]]}
    reply = cohere_embeddings_reply(floats, model="bedrock/cohere", count=2, input_tokens=4)
    assert reply["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    assert read(reply, 2) == [[0.1, 0.2], [0.3, 0.4]]
    by_type = {"id": "e2", "response_type": "embeddings_by_type", "embeddings": {"float": [[1.0, 2.0]]}}
    uncounted = cohere_embeddings_reply(by_type, model="m", count=1)
    assert "usage" not in uncounted and read(uncounted, 1) == [[1.0, 2.0]]  # calls/embeddings.py counts
    billed = {**floats, "meta": {"billed_units": {"input_tokens": 6}}}
    assert cohere_embeddings_reply(billed, model="m", count=2, input_tokens=4)["usage"]["prompt_tokens"] == 6


@pytest.mark.parametrize(("reply", "count"), [
    ({"embeddings": [[0.1]]}, 2), ({"embeddings": {"int8": [[1]]}}, 1), ({"embeddings": [[]]}, 1), ("x", 1),
    ({"embeddings": [["a"]]}, 1)])
def test_a_cohere_reply_that_is_not_one_is_refused(reply, count):
    with pytest.raises(ValueError):
        cohere_embeddings_reply(reply, model="m", count=count)


def test_the_openai_reply_shape():
    reply = openai_embeddings_reply([[0.5]], model="m", prompt_tokens=2)
    CreateEmbeddingResponse.model_validate(reply)
    assert reply == {"object": "list", "model": "m", "data": [{"object": "embedding", "index": 0, "embedding": [0.5]}],
                     "usage": {"prompt_tokens": 2, "total_tokens": 2}}
