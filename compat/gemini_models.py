"""The Gemini API's model list and embeddings, for the Gemini surface (compat/gemini.py).

`GET /v1beta/models` lists the models the caller's group may use in Google's shape (`models/<id>`,
the generation methods its capabilities allow, its context window as `inputTokenLimit`), aliases
after them; `GET /v1beta/models/{model}` is one of them. `embedContent` and `batchEmbedContents` go
the embeddings' way (gateway/calls/embeddings.py: the same input limits, model choice, group limits,
quota and fall-through as /v1/embeddings), their vectors answered as Google's `values`. A text is
the text of its content's parts; `outputDimensionality` is refused (the vectors are the model's
own size); `taskType` and `title`, hints to Google's own embedding models, are not sent on."""

from __future__ import annotations

import uuid
from typing import Any

from accounts.endpoints import endpoint
from gateway.calls.embeddings import embed, embedding_chain, parse_input
from gateway.calls.metering import AfterSendResponse, meter
from gateway.formats.gemini.to_chat import bad_request, get, model_name
from gateway.limits import ratelimit
from gateway.models import Model
from gateway.registry.routing import usable_aliases, usable_targets
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError, ValidationFailed
from gateway.web.output import respond

SURFACE = "gemini"
METHODS = {"chat": ["generateContent", "streamGenerateContent", "countTokens"],
           "embeddings": ["embedContent", "batchEmbedContents"]}


def path_model(request) -> str:
    """The gateway's model id the path names (its `{model}`, without Google's `models/`)."""
    return model_name(request.resolver_match.kwargs["model"])


def _entry(name: str, description: str, capabilities: frozenset[str] | set[str],
           window: int | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": f"models/{name}", "baseModelId": name, "version": "1", "displayName": name,
                             "description": description}
    if window:
        entry["inputTokenLimit"] = window
    entry["supportedGenerationMethods"] = [m for kind, methods in METHODS.items() if kind in capabilities
                                           for m in methods]
    return entry


def _listed(group) -> list[dict[str, Any]]:
    targets = usable_targets(group)
    windows = dict(Model.objects.filter(pk__in=[t.id for t in targets]).values_list("pk", "context_window"))
    entries = [_entry(t.public_id, f"{t.name} on the server '{t.server.name}'", t.capabilities, windows.get(t.id))
               for t in targets]
    entries += [_entry(pool.name, "An alias of the gateway's, over several models",
                       {c for d in pool.deployments for c in d.target.capabilities}, None)
                for pool in usable_aliases(group, capability=None)]
    return entries


@endpoint("GET", limit=ratelimit.V1)
def models(request):
    return respond({"models": _listed(request.principal.account.group)})


@endpoint("GET", limit=ratelimit.V1)
def model(request, model: str):
    name = f"models/{model_name(model)}"
    for entry in _listed(request.principal.account.group):
        if entry["name"] == name:
            return respond(entry)
    raise ApiError(404, f"Model '{model_name(model)}' is not found, or your account group may not use it.",
                   code="not_found")


def _text(content: Any, where: str) -> str:
    parts = get(content, "parts")
    if not isinstance(parts, list) or not parts:
        raise bad_request(f"{where}.parts: a non-empty list of text parts is required.")
    texts = [get(part, "text") for part in parts]
    if not all(isinstance(text, str) for text in texts):
        raise bad_request(f"{where}.parts: only text parts can be embedded.")
    return "".join(texts)


def _checked(request, texts: list[str], bodies: list[dict]) -> tuple[list[str], list]:
    """The input's limits (/v1/embeddings'), the group's and the quota, checked; a 400 names the field."""
    for body in bodies:
        if get(body, "outputDimensionality") is not None:
            raise bad_request("outputDimensionality: not supported; each vector has the model's own size.")
    try:
        texts, _ = parse_input({"input": texts})
    except ValidationFailed as invalid:
        raise bad_request(f"content: {invalid.message}") from None
    chain = embedding_chain(account=request.principal.account, model_id=path_model(request),
                            quota_used=request.quota_used)
    return texts, chain


def _prepare_one(request):
    body = read_json_object(request)
    return _checked(request, [_text(get(body, "content"), "content")], [body])


def _prepare_batch(request):
    requests = get(read_json_object(request), "requests")
    if not isinstance(requests, list) or not requests:
        raise bad_request("requests: a non-empty list of embedContent requests is required.")
    texts = []
    for i, item in enumerate(requests):
        asked = get(item, "model")
        if asked is not None and model_name(str(asked)) != path_model(request):
            raise bad_request(f"requests[{i}].model: must be the model of the path, '{path_model(request)}'.")
        texts.append(_text(get(item, "content"), f"requests[{i}].content"))
    return _checked(request, texts, requests)


async def _embedded(request) -> tuple[list[list[float]], Any]:
    texts, chain = request.prepared
    result = await embed(chain, texts, refusals_fall_through=True)  # /v1: spec 7.3
    account_id, model = request.principal.account.pk, result.target.public_id

    def record() -> None:
        meter(account_id=account_id, model=model, surface=SURFACE, input_tokens=result.prompt_tokens,
              output_tokens=0, request_id=request.request_id, price=result.target.price)

    return result.vectors, record


def _answer(body: dict[str, Any], record) -> AfterSendResponse:
    response = AfterSendResponse(respond(body).content, after_send=record, content_type="application/json")
    response["X-Inference-Request-Id"] = uuid.uuid4().hex
    return response


@endpoint("POST", limit=ratelimit.V1, prepare=_prepare_one)
async def embed_content(request, model: str):
    vectors, record = await _embedded(request)
    return _answer({"embedding": {"values": vectors[0]}}, record)


@endpoint("POST", limit=ratelimit.V1, prepare=_prepare_batch)
async def batch_embed_contents(request, model: str):
    vectors, record = await _embedded(request)
    return _answer({"embeddings": [{"values": vector} for vector in vectors]}, record)
