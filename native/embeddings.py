"""POST /api/v1/embeddings: one string or a list of strings embedded by the embedding model
(or the one named), with its fallbacks; OpenAI-like reply; usage metered after the reply."""

from __future__ import annotations

from accounts.endpoints import endpoint
from gateway.calls.embeddings import embed, embedding_chain, parse_input
from gateway.calls.metering import AfterSendResponse, meter
from gateway.calls.screened import screened_texts, screening_for
from gateway.limits import ratelimit
from gateway.web.body import read_json_object
from gateway.web.output import respond

SURFACE = "native_embeddings"


def _prepare(request):
    """Body, group limits, quota: in the endpoint's worker hop, before anything is sent upstream."""
    texts, model = parse_input(read_json_object(request))
    chain = embedding_chain(account=request.principal.account, model_id=model, quota_used=request.quota_used)
    return texts, chain


@endpoint("POST", limit=ratelimit.EMBEDDINGS, prepare=_prepare)
async def embeddings(request):
    texts, chain = request.prepared
    texts = await screened_texts(screening_for(request.principal.account.group, request.request_id), texts)
    result = await embed(chain, texts)
    account_id = request.principal.account.pk
    model = result.target.public_id

    def record() -> None:
        meter(account_id=account_id, model=model, surface=SURFACE, input_tokens=result.prompt_tokens,
              output_tokens=0, request_id=request.request_id, price=result.target.price)

    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(result.vectors)],
        "model": model,
        "usage": {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens},
    }
    return AfterSendResponse(respond(body).content, after_send=record, content_type="application/json")
