"""POST /v1/embeddings in OpenAI's shape, on the native embeddings' path (gateway/calls/embeddings.py):
the same limits on the input, model choice, group limits, quota check and fall-through, with the
/v1 ceiling and errors in the OpenAI shape (a bad field is a 400 naming it in `param`).

`encoding_format: "base64"`, which the openai SDK sends when its caller names no format, is
answered with each vector's little-endian float32 bytes in base64, as OpenAI does and the SDK
decodes. `dimensions` is refused: the vectors are the model's own, never cut to a size."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from accounts.endpoints import endpoint
from gateway.calls.embeddings import embed, embedding_chain, float32_blobs, parse_input
from gateway.calls.metering import AfterSendResponse, meter
from gateway.calls.screened import screened_texts, screening_for
from gateway.limits import ratelimit
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError, ValidationFailed
from gateway.web.output import respond
from gateway.web.validation import check_field_types

SURFACE = "embeddings"
ENCODINGS = ("float", "base64")

# The types of the request's fields (OpenAI's API reference); `user` is taken and not passed on.
FIELDS = {"model": "string", "input": "string|array", "encoding_format": "string", "dimensions": "integer",
          "user": "string"}


def _refused(message: str, param: str) -> ApiError:
    return ApiError(400, message, code="invalid_request_error", param=param)


def embeddings_form(body: dict[str, Any]) -> tuple[list[str], str | None, str]:
    """The texts, the requested model (None: the default embedding model) and the encoding, or a
    400 naming the field. The input's limits are the native endpoint's (gateway.calls.embeddings.parse_input)."""
    check_field_types(body, FIELDS)
    encoding = body.get("encoding_format") or "float"
    if encoding not in ENCODINGS:
        raise _refused("encoding_format: must be 'float' or 'base64'.", "encoding_format")
    if body.get("dimensions") is not None:
        raise _refused("dimensions: not supported; each vector has the model's own size.", "dimensions")
    if _token_ids(body.get("input")):
        raise _refused("input: token ids are not supported; send the text.", "input")
    try:
        texts, model = parse_input(body)
    except ValidationFailed as invalid:
        field = next(iter(invalid.errors))
        raise _refused(f"{field}: {invalid.message}", field) from None
    return texts, model, encoding


def _token_ids(value: Any) -> bool:
    """Whether `input` is OpenAI's other form: one list of token ids, or a list of them."""
    def ids(items: Any) -> bool:
        return isinstance(items, list) and bool(items) and all(
            isinstance(i, int) and not isinstance(i, bool) for i in items)

    return ids(value) or (isinstance(value, list) and bool(value) and all(ids(v) for v in value))


def _prepare(request):
    """Body, group limits, quota: in the endpoint's worker hop, before anything is sent upstream."""
    texts, model, encoding = embeddings_form(read_json_object(request))
    chain = embedding_chain(account=request.principal.account, model_id=model, quota_used=request.quota_used)
    return texts, chain, encoding


@endpoint("POST", limit=ratelimit.V1, prepare=_prepare, idempotent=True)
async def embeddings(request):
    texts, chain, encoding = request.prepared
    texts = await screened_texts(screening_for(request.principal.account.group, request.request_id), texts)
    result = await embed(chain, texts, refusals_fall_through=True)  # /v1: spec 7.3
    account_id = request.principal.account.pk
    model = result.target.public_id

    def record() -> None:
        meter(account_id=account_id, model=model, surface=SURFACE, input_tokens=result.prompt_tokens,
              output_tokens=0, request_id=request.request_id, price=result.target.price)

    if encoding == "base64":
        vectors: list[Any] = [base64.b64encode(blob).decode("ascii") for blob in float32_blobs(result.vectors)]
    else:
        vectors = result.vectors
    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "model": model,
        "usage": {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens},
    }
    response = AfterSendResponse(respond(body).content, after_send=record, content_type="application/json")
    response["X-Inference-Request-Id"] = uuid.uuid4().hex
    return response
