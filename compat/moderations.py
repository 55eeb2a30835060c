"""POST /v1/moderations in OpenAI's shape, answered by the caller's group's guardrails run as input checks
(docs/guardrails.md), so that a client that moderates before it calls can ask the gateway: what would the
group's checks find in this text?

- `input` is a string (one result), a list of strings (a result each, checked apart: a block in one does
  not hide the others) or OpenAI's multimodal list of parts (one result over its text parts; an image is
  not read). `model` is taken and not used: no model is called unless the group has a `model` check.
- A result is `flagged` when any check found something, whatever its action (block, redact or log): the
  client asked what the checks see, not what a call would do with it. A `model` or `webhook` check that could
  not answer flags the input only when it fails closed (a call would be refused); failing open, it is listed
  in `findings` (entity GUARD_FAILED) and flags nothing. As on a call, a `block` ends that input's checks, so
  the checks after it may not have run.
- `categories` and `category_scores` keep all of OpenAI's names (false and 0: the gateway does not judge
  them) and add one key per kind of check (`pii`, `secrets`, `injection`, `words`, `model`, `webhook`), true
  and 1 when it found something; the openai SDK's `ModerationCreateResponse` keeps extra keys. `findings`
  (an extra field of each result) lists what was found: check, entity, action, `index` (the part of a
  multimodal input) and offset, never the text.
- A group without guardrails flags nothing. The call is authenticated and limited like every /v1 endpoint
  and metered nowhere (no model answered it)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from accounts.endpoints import endpoint
from gateway.guard import Blocked, Screening, policy_of
from gateway.guard.findings import GUARD_FAILED
from gateway.guard.policy import CHECKS
from gateway.limits import ratelimit
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError
from gateway.web.output import respond
from gateway.web.validation import check_field_types

FIELDS = {"model": "string", "input": "string|array"}
MAX_INPUTS = 64  # as /v1/embeddings takes
MODEL = "guardrails"  # the answer's `model`: the group's checks answered, not a model
# OpenAI's categories (the SDK's `Categories`), none of which the gateway judges
OPENAI_CATEGORIES = ("harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
                     "self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence",
                     "violence/graphic")


def _refused(message: str) -> ApiError:
    return ApiError(400, message, code="invalid_request_error", param="input")


def moderation_inputs(body: dict[str, Any]) -> list[tuple[list[str], list[int]]]:
    """Each result's texts and where each text is in its input (a finding's `index`): `([text], [0])` for a
    string, one of those per string of a list, `([text, text], [0, 2])` for the multimodal list (its text
    parts, by their place among all its parts); or a 400 naming `input`."""
    check_field_types(body, FIELDS)
    value = body.get("input")
    if value is None:
        raise _refused("input: required (a string, a list of strings, or a list of text and image parts).")
    if isinstance(value, str):
        return [([value], [0])]
    if not value:
        raise _refused("input: must not be empty.")
    if len(value) > MAX_INPUTS:
        raise _refused(f"input: at most {MAX_INPUTS} items.")
    if all(isinstance(item, str) for item in value):
        return [([item], [0]) for item in value]
    texts, places = [], []
    for index, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
            places.append(index)
        elif kind != "image_url":
            raise _refused(f"input[{index}]: must be a string, or a part of type text (with `text`) or image_url.")
    return [(texts, places)]


def _prepare(request):
    """The inputs and the group's policy (None: no guardrails), before anything runs."""
    inputs = moderation_inputs(read_json_object(request))
    group = request.principal.account.group
    return inputs, policy_of(group), group.name


async def _findings(policy, texts: list[str], group_name: str, request_id: str) -> list:
    """What the input checks find in `texts`, up to a block."""
    screening = Screening(policy, group_name=group_name, request_id=request_id)
    try:
        await screening.input(texts)
    except Blocked as blocked:
        return [*screening.findings, *([blocked.finding] if blocked.finding not in screening.findings else [])]
    return list(screening.findings)


def _counts(finding) -> bool:
    """Whether a finding flags its input: anything found does, but a guard that could not answer (a model or
    webhook check's failure) only when its fail mode is closed, as then the call would be refused."""
    return finding.entity != GUARD_FAILED or finding.action == "block"


def moderation_result(findings: list, places: list[int]) -> dict[str, Any]:
    found = {finding.check for finding in findings if _counts(finding)}
    categories = {**dict.fromkeys(OPENAI_CATEGORIES, False), **{check: check in found for check in CHECKS}}
    return {
        "flagged": bool(found),
        "categories": categories,
        "category_scores": {name: 1.0 if flagged else 0.0 for name, flagged in categories.items()},
        "category_applied_input_types": {**{name: [] for name in OPENAI_CATEGORIES},
                                         **{check: ["text"] for check in CHECKS}},
        "findings": [{"check": f.check, "entity": f.entity, "action": f.action,
                      "index": places[f.index] if 0 <= f.index < len(places) else f.index, "offset": f.offset}
                     for f in findings],
    }


@endpoint("POST", limit=ratelimit.V1, prepare=_prepare, prepare_in_loop=True)
async def moderations(request):
    inputs, policy, group_name = request.prepared
    if policy is None:
        results = [moderation_result([], places) for _, places in inputs]
    else:
        found = await asyncio.gather(*(_findings(policy, texts, group_name, request.request_id)
                                       for texts, _ in inputs))
        results = [moderation_result(findings, places) for findings, (_, places) in zip(found, inputs)]
    return respond({"id": f"modr-{uuid.uuid4().hex}", "model": MODEL, "results": results})
