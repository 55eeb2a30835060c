"""What differs by model family behind Converse: the fields a family takes in
`additionalModelRequestFields` (top_k, reasoning), whether it caches prompts at a `cachePoint`, and
whether it takes a tool result's `status`. The family is read from the Bedrock model id, which may
carry a cross-region prefix (`us.`, `eu.`, `global.`, ...) or be an inference profile's ARN; an id
that names no known family (an application inference profile's ARN) is `other`, and gets only what
every Converse model takes."""

from __future__ import annotations

from typing import Any

from gateway.formats.anthropic.from_chat import EFFORT as CLAUDE_EFFORT  # as the Anthropic translation says it

CLAUDE, NOVA, NOVA_2, GPT_OSS, MISTRAL, COHERE_R, OTHER = (
    "claude", "nova", "nova-2", "gpt-oss", "mistral", "cohere-command-r", "other")

# (what the id contains, its family), first match wins: Nova 2 before Nova.
_MARKS = (("anthropic.", CLAUDE), ("claude", CLAUDE), ("amazon.nova-2", NOVA_2), ("amazon.nova", NOVA),
          ("openai.gpt-oss", GPT_OSS), ("mistral.mistral-7b", MISTRAL), ("mistral.mixtral", MISTRAL),
          ("cohere.command-r", COHERE_R))

# Bedrock refuses a cachePoint on a model without prompt caching ("You invoked an unsupported model or
# your request did not allow prompt caching"): only Claude and Amazon Nova cache. Nova takes no
# cachePoint among the tools and no ttl.
CACHING = frozenset({CLAUDE, NOVA, NOVA_2})
TOOL_CACHING = frozenset({CLAUDE})
CACHE_TTLS = ("5m", "1h")
# A toolResult's `status` ("error"): "only supported by Amazon Nova and Anthropic Claude" (the API reference).
TOOL_STATUS = frozenset({CLAUDE, NOVA, NOVA_2})

# Each family's own name for top_k, as Bedrock documents its inference parameters; the other families
# (Llama, Titan, DeepSeek, Jamba, Mistral Large, ...) take none.
_TOP_K = {CLAUDE: lambda k: {"top_k": k}, NOVA: lambda k: {"inferenceConfig": {"topK": k}},
          NOVA_2: lambda k: {"inferenceConfig": {"topK": k}}, MISTRAL: lambda k: {"top_k": k},
          COHERE_R: lambda k: {"k": k}}

# reasoning_effort, by family. Claude: as the Anthropic translation has it (output effort; "none" turns
# thinking off). Nova 2: `reasoningConfig`, off unless asked. gpt-oss: its own `reasoning_effort`; it
# always reasons, so "none" cannot be said.
THREE_EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}


def family(model_id: Any) -> str:
    model = model_id.lower() if isinstance(model_id, str) else ""
    return next((name for mark, name in _MARKS if mark in model), OTHER)


def cache_point(kind: str, cache_control: Any, *, in_tools: bool = False) -> dict | None:
    """The cachePoint block a `cache_control` mark becomes, or None where the family does not cache
    (there the mark is left out without refusal: a caching hint asks nothing of the model)."""
    if cache_control is None or cache_control is False or kind not in (TOOL_CACHING if in_tools else CACHING):
        return None
    point = {"type": "default"}
    ttl = cache_control.get("ttl") if isinstance(cache_control, dict) else None
    if kind == CLAUDE and ttl in CACHE_TTLS:
        point["ttl"] = ttl
    return {"cachePoint": point}


def top_k_fields(kind: str, top_k: Any) -> dict | None:
    """`additionalModelRequestFields` for top_k, or None: the family takes no top_k."""
    make = _TOP_K.get(kind)
    return make(top_k) if make else None


def reasoning_fields(kind: str, effort: Any) -> tuple[dict, dict] | None:
    """(outputConfig fields, additionalModelRequestFields) for a reasoning_effort, or None: the family
    has no way to say it. Nothing to send (both empty) where the effort asks for the family's default."""
    if kind == CLAUDE:
        if effort == "none":
            return {}, {"thinking": {"type": "disabled"}}
        return ({"effort": CLAUDE_EFFORT[effort]}, {}) if effort in CLAUDE_EFFORT else None
    if kind == NOVA_2:
        if effort == "none":
            return {}, {}
        if effort in THREE_EFFORTS:
            return {}, {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": THREE_EFFORTS[effort]}}
    if kind == GPT_OSS and effort in THREE_EFFORTS:
        return {}, {"reasoning_effort": THREE_EFFORTS[effort]}
    return None
