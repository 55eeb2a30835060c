"""The chat form's replies -> Gemini's GenerateContentResponse, for the Gemini surface
(compat/gemini.py) when the answering server does not speak Gemini's format: a whole
chat.completion (`chat_to_gemini_response`) or its chunks (`ChatToGeminiStream`).

Text streams as text parts as it comes; a tool call, whose arguments a chat server streams in
pieces, goes out whole as a `functionCall` part (its id the chat call's, which the client sends
back in its `functionResponse`) once its choice ends. Reasoning (`reasoning_content`) is a thought
part. A refusal is a candidate stopped for SAFETY with the refusal's text as `finishMessage`."""

from __future__ import annotations

import json
from typing import Any

from gateway.formats.gemini.usage import gemini_usage

FINISH_TO_GEMINI = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP", "function_call": "STOP",
                    "content_filter": "SAFETY"}


def finish_reason(reason: str | None) -> str:
    return FINISH_TO_GEMINI.get(reason or "stop", "OTHER")


def usage_metadata(usage: dict[str, Any] | None) -> dict[str, int]:
    """The chat form's usage as Gemini's `usageMetadata`: reasoning tokens are thoughts, apart
    from the candidates' own; cached prompt tokens are cached content."""
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    thoughts = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    metadata = {"promptTokenCount": prompt, "candidatesTokenCount": max(completion - thoughts, 0),
                "totalTokenCount": prompt + completion}
    if thoughts:
        metadata["thoughtsTokenCount"] = thoughts
    if cached:
        metadata["cachedContentTokenCount"] = cached
    return metadata


def _call_part(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    try:
        args = json.loads(function.get("arguments") or "{}")
    except ValueError:
        args = {}
    part: dict[str, Any] = {"name": function.get("name") or "", "args": args if isinstance(args, dict) else {}}
    if call.get("id"):
        part["id"] = call["id"]
    return {"functionCall": part}


def _candidate(index: int, parts: list[dict[str, Any]], reason: str | None = None,
               refusal: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": index}
    if reason is not None or refusal:
        candidate["finishReason"] = "SAFETY" if refusal else finish_reason(reason)
    if refusal:
        candidate["finishMessage"] = refusal
    return candidate


def chat_to_gemini_response(completion: dict[str, Any]) -> dict[str, Any]:
    """A whole chat.completion as a GenerateContentResponse."""
    candidates = []
    for choice in completion.get("choices") or ():
        message = choice.get("message") or {}
        parts: list[dict[str, Any]] = []
        if reasoning := message.get("reasoning_content") or message.get("reasoning"):
            parts.append({"text": reasoning, "thought": True})
        if message.get("content"):
            parts.append({"text": message["content"]})
        parts.extend(_call_part(call) for call in message.get("tool_calls") or ())
        candidates.append(_candidate(choice.get("index") or 0, parts, choice.get("finish_reason"),
                                     message.get("refusal")))
    return {"candidates": candidates, "usageMetadata": usage_metadata(completion.get("usage")),
            "modelVersion": completion.get("model"), "responseId": completion.get("id")}


class ChatToGeminiStream:
    """Feed chat.completion.chunk dicts; each gives the GenerateContentResponse chunks to send.
    `finish(usage)` gives the last: every candidate's finish reason and the usage."""

    def __init__(self, model: str, response_id: str) -> None:
        self.model = model
        self.response_id = response_id
        self.calls: dict[int, dict[int, dict[str, Any]]] = {}  # choice -> call index -> the call so far
        self.reasons: dict[int, str | None] = {}
        self.refusals: dict[int, str] = {}

    def _response(self, candidates: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
        response: dict[str, Any] = {"candidates": candidates}
        if usage is not None:
            response["usageMetadata"] = usage_metadata(usage)
        response.update(modelVersion=self.model, responseId=self.response_id)
        return response

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        candidates = []
        for choice in chunk.get("choices") or ():
            index = choice.get("index") or 0
            delta = choice.get("delta") or {}
            parts: list[dict[str, Any]] = []
            if reasoning := delta.get("reasoning_content") or delta.get("reasoning"):
                parts.append({"text": reasoning, "thought": True})
            if delta.get("content"):
                parts.append({"text": delta["content"]})
            if delta.get("refusal"):
                self.refusals[index] = self.refusals.get(index, "") + delta["refusal"]
            for call in delta.get("tool_calls") or ():
                self._gather(index, call)
            if choice.get("finish_reason") is not None:
                self.reasons[index] = choice["finish_reason"]
                parts.extend(_call_part(call) for call in self._take(index))
            if parts:
                candidates.append(_candidate(index, parts))
        return [self._response(candidates)] if candidates else []

    def _gather(self, index: int, delta: dict[str, Any]) -> None:
        calls = self.calls.setdefault(index, {})
        call = calls.setdefault(delta.get("index", len(calls)), {"id": None, "function": {"name": "", "arguments": ""}})
        call["id"] = delta.get("id") or call["id"]
        function = delta.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""

    def _take(self, index: int) -> list[dict[str, Any]]:
        calls = self.calls.pop(index, {})
        return [calls[k] for k in sorted(calls)]

    def finish(self, usage: dict[str, Any]) -> list[dict[str, Any]]:
        """The closing chunk: the finish reason of each candidate (a call still open goes out
        first) and the usage."""
        indexes = sorted(set(self.reasons) | set(self.calls) | set(self.refusals)) or [0]
        candidates = []
        for index in indexes:
            parts = [_call_part(call) for call in self._take(index)]
            reason = self.reasons.get(index) or ("tool_calls" if parts else "stop")
            candidates.append(_candidate(index, parts, reason, self.refusals.get(index)))
        return [self._response(candidates, usage)]


class GeminiAccumulator:
    """A Gemini server's own GenerateContentResponse chunks (a request passed through untranslated)
    gathered into the whole response: each candidate's parts (consecutive text of the same kind
    joined), its finish reason and the other fields it had; the last usageMetadata, in Gemini's
    form and (`usage`) the chat form the metering reads."""

    def __init__(self) -> None:
        self.candidates: dict[int, dict[str, Any]] = {}
        self.fields: dict[str, Any] = {}  # promptFeedback, modelVersion, ... as the last chunk gave them
        self.metadata: dict[str, Any] | None = None
        self.usage: dict[str, Any] | None = None

    def feed(self, chunk: dict[str, Any]) -> None:
        for key, value in chunk.items():
            if key == "usageMetadata" and isinstance(value, dict):
                self.metadata, self.usage = value, gemini_usage(value)
            elif key != "candidates":
                self.fields[key] = value
        for candidate in chunk.get("candidates") or ():
            gathered = self.candidates.setdefault(candidate.get("index") or 0, {"content": {"role": "model",
                                                                                           "parts": []}})
            for key, value in candidate.items():
                if key != "content":
                    gathered[key] = value
            parts = gathered["content"]["parts"]
            for part in (candidate.get("content") or {}).get("parts") or ():
                if (parts and isinstance(part.get("text"), str) and set(part) <= {"text", "thought"}
                        and set(parts[-1]) == set(part) and parts[-1].get("thought") == part.get("thought")):
                    parts[-1] = {**parts[-1], "text": parts[-1]["text"] + part["text"]}
                else:
                    parts.append(dict(part))

    def delivered_output_text(self) -> str:
        """What the model produced, for counting tokens when the server gave no usage."""
        texts = []
        for candidate in self.candidates.values():
            for part in candidate["content"]["parts"]:
                texts.append(part["text"] if isinstance(part.get("text"), str)
                             else json.dumps(part.get("functionCall") or ""))
        return "".join(texts)

    def message(self, *, message_id: str, model: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        """The whole GenerateContentResponse; `usage` (the chat form's, as counted) when the server gave none."""
        response: dict[str, Any] = {"candidates": [self.candidates[i] for i in sorted(self.candidates)]}
        response.update(self.fields)
        metadata = self.metadata if self.metadata is not None else usage_metadata(usage)
        response.update(usageMetadata=metadata, modelVersion=model, responseId=message_id)
        return response
