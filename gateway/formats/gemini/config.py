"""A chat request's settings as a generateContent request's: `generationConfig` (sampling, length, stop
sequences, candidates, structured output, thinking) and the request-level fields beside it
(`cachedContent`, `safetySettings`, `serviceTier`, `labels`)."""

from __future__ import annotations

import re
from typing import Any

from gateway.formats.anthropic.to_chat import as_object, bad_request

# reasoning_effort → thinkingBudget (tokens) on the models that count thinking in tokens (Gemini 2.x).
# Every budget here is within each 2.5 model's range (Pro 128–32768, Flash 0–24576, Flash-Lite
# 512–24576); "none" is 0 (no thinking), except on a Pro, which cannot stop thinking: its least.
THINKING_BUDGETS = {"minimal": 512, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 24576}
PRO_THINKING_BUDGETS = {**THINKING_BUDGETS, "none": 128, "xhigh": 32768}
# reasoning_effort → thinkingLevel on Gemini 3, which thinks by level. A Pro cannot go below LOW.
THINKING_LEVELS = {"none": "MINIMAL", "minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH",
                   "xhigh": "HIGH"}
# OpenAI's service tiers → Gemini's ("auto", the default, is nothing to send).
SERVICE_TIERS = {"default": "standard", "flex": "flex", "priority": "priority"}
# A label value as Google takes it (lowercase letters, digits, underscores and dashes, at most 63).
_LABEL_VALUE = re.compile(r"[\w-]{1,63}")


def generation_config(body: dict, lost: list[str], *, native_format: bool = True) -> dict:
    """The generationConfig of a chat request (empty when it sets nothing). Without `native_format`,
    the response_format goes by a function instead (from_chat.gemini_output_tool)."""
    config: dict[str, Any] = {}
    for key, name in (("temperature", "temperature"), ("top_p", "topP"), ("presence_penalty", "presencePenalty"),
                      ("frequency_penalty", "frequencyPenalty")):
        if isinstance(body.get(key), (int, float)) and not isinstance(body[key], bool):
            config[name] = body[key]
    for key, name in (("top_k", "topK"), ("seed", "seed")):
        if _integer(body.get(key)):
            config[name] = body[key]
    most = body.get("max_completion_tokens") or body.get("max_tokens")
    if _integer(most):
        config["maxOutputTokens"] = most
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    if stops := [s for s in stops if isinstance(s, str) and s]:
        config["stopSequences"] = stops
    if body.get("logprobs") is True:
        config["responseLogprobs"] = True
        if _integer(body.get("top_logprobs")) and body["top_logprobs"] > 0:
            config["logprobs"] = body["top_logprobs"]
    elif _integer(body.get("top_logprobs")) and body["top_logprobs"] > 0:
        lost.append("top_logprobs")  # top tokens without the tokens: nothing Gemini can be asked
    if _integer(body.get("n")) and body["n"] != 1:
        config["candidateCount"] = body["n"]
    if native_format:
        _response_format(body.get("response_format"), config, lost)
    if (thinking := thinking_config(body.get("reasoning_effort"), body.get("model"))) is not None:
        config["thinkingConfig"] = thinking
    elif body.get("reasoning_effort") is not None:
        lost.append("reasoning_effort")
    return config


def _response_format(fmt: Any, config: dict, lost: list[str]) -> None:
    """json_schema → responseMimeType application/json with the schema as responseJsonSchema (Gemini
    constrains its output to it natively, no forced tool needed); json_object → the media type alone."""
    fmt = as_object(fmt)
    kind = fmt.get("type")
    if kind == "json_object":
        config["responseMimeType"] = "application/json"
    elif kind == "json_schema":
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = as_object(fmt.get("json_schema")).get("schema") or {"type": "object"}
    elif kind not in (None, "text"):
        lost.append("response_format")


def thinking_config(effort: Any, model: Any) -> dict | None:
    """The thinkingConfig of a `reasoning_effort` for the model named (None: no effort, one not known,
    or a model that does not think: Gemini 1.x and 2.0). Gemini 3 takes a level, earlier models a token
    budget; which, is told by the model's name, the one thing that says it. The thoughts are asked for
    (`includeThoughts`) whenever the model thinks, so that the reply carries them as `reasoning_content`."""
    if not isinstance(effort, str) or effort not in THINKING_LEVELS:
        return None
    name = model.rsplit("/", 1)[-1].lower() if isinstance(model, str) else ""
    pro = "-pro" in name
    if name.startswith(("gemini-1", "gemini-2.0")):
        return None  # no thinking to set
    if name.startswith("gemini-3"):
        level = "LOW" if pro and THINKING_LEVELS[effort] == "MINIMAL" else THINKING_LEVELS[effort]
        return {"thinkingLevel": level, "includeThoughts": True}
    if effort == "none" and not pro:
        return {"thinkingBudget": 0}
    return {"thinkingBudget": (PRO_THINKING_BUDGETS if pro else THINKING_BUDGETS)[effort], "includeThoughts": True}


def request_fields(body: dict, req: dict, lost: list[str]) -> None:
    """cachedContent (a context cache the client made, named by the extra field `cached_content`),
    safetySettings (`safety_settings`, Gemini's own list), serviceTier and labels (the `user`)."""
    cached = body.get("cached_content")
    if cached is not None:
        if not isinstance(cached, str) or not cached:
            raise bad_request("cached_content: must be the name of a cached content, such as 'cachedContents/abc'.")
        req["cachedContent"] = cached_content_name(cached)
    settings = body.get("safety_settings")
    if settings is not None:
        if not isinstance(settings, list) or not all(isinstance(s, dict) for s in settings):
            raise bad_request("safety_settings: must be a list of {category, threshold} objects.")
        req["safetySettings"] = settings
    tier = body.get("service_tier")
    if tier in SERVICE_TIERS:
        req["serviceTier"] = SERVICE_TIERS[tier]
    elif tier not in (None, "auto"):
        lost.append("service_tier")
    user, safety = body.get("user"), body.get("safety_identifier")
    who = user if user is not None else safety
    if who is not None:
        if isinstance(who, str) and _LABEL_VALUE.fullmatch(who) and who == who.lower():
            req["labels"] = {"user": who}
        else:
            lost.append("user" if user is not None else "safety_identifier")
        if user is not None and safety is not None and user != safety:
            lost.append("safety_identifier")


def cached_content_name(name: str, *, project: str | None = None, location: str | None = None) -> str:
    """A context cache's resource name completed as google-genai completes it: `abc` is
    `cachedContents/abc` on the Gemini API, and on Vertex AI (with its `project` and `location`)
    `projects/<p>/locations/<l>/cachedContents/abc`, which a Vertex provider gets by calling this again
    on the request's `cachedContent`. A name of any other shape is left as the client wrote it."""
    short = not name.startswith("cachedContents/") and "/" not in name
    if project is None:
        return f"cachedContents/{name}" if short else name
    if name.startswith("locations/"):
        return f"projects/{project}/{name}"
    name = f"cachedContents/{name}" if short else name
    return f"projects/{project}/locations/{location}/{name}" if name.startswith("cachedContents/") else name


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
