"""OpenAI chat completions (`POST /v1/chat/completions`), streamed and not, and the OpenAI error body."""

from __future__ import annotations

import time
import uuid
from typing import Any

from .core import (
    ClientError,
    Reply,
    Stream,
    count_words,
    default_reply,
    dumps,
    json_reply,
    limit_tokens,
    split_arguments,
    split_tokens,
    tool_arguments,
)

# What OpenAI's chat replies name the backend configuration by: a string in its API reference.
FINGERPRINT = "fp_reference"

# status -> (error.type, error.code) as api.openai.com sends them
ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    409: ("conflict_error", None),
    422: ("invalid_request_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    503: ("server_error", "service_unavailable"),
    529: ("overloaded_error", "overloaded"),
}


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind, code = ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def content_text(content: Any) -> str:
    """A message's text: the string itself, or its text parts joined by spaces."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _tool_to_call(body: dict[str, Any], knobs: dict[str, Any]) -> str | None:
    """The tool this request should call, or None when the model should answer in text."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if not tools or choice == "none":
        return None
    if knobs["tool_name"]:
        return knobs["tool_name"]
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict) and choice["function"].get("name"):
        return choice["function"]["name"]
    first = tools[0] if isinstance(tools[0], dict) else {}
    return (first.get("function") or {}).get("name") or first.get("name") or "tool"


def _scripted_call(body: dict[str, Any], messages: list[dict[str, Any]],
                   knobs: dict[str, Any]) -> tuple[str, str] | None:
    """With `tool_script`: (name, arguments) of the entry for this round (the number of assistant
    tool calls since the last user message), or None once the script is used up."""
    script = knobs["tool_script"]
    if script is None or not body.get("tools") or body.get("tool_choice") == "none":
        return None
    rounds = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        rounds += message.get("role") == "assistant" and bool(message.get("tool_calls"))
    if rounds >= len(script):
        return None
    entry = script[rounds]
    name = entry.get("name") or _tool_to_call(body, {**knobs, "tool_name": None})
    value = entry.get("arguments", {})
    return name, value if isinstance(value, str) else dumps(value)


def chat_completions(body: Any, knobs: dict[str, Any]) -> Reply | Stream:
    if not isinstance(body, dict):
        raise ClientError(400, "We could not parse the JSON body of your request.")
    messages = body.get("messages")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ClientError(400, "you must provide a model parameter", "model")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ClientError(400, "'messages' must be a non-empty array of message objects", "messages")

    prompt_tokens = sum(count_words(content_text(m.get("content"))) for m in messages)
    last = messages[-1]
    tool = None
    scripted = _scripted_call(body, messages, knobs)
    if scripted is not None:
        tool, text = scripted[0], ""
    elif last.get("role") == "tool":
        text = "Tool said: " + content_text(last.get("content"))
    elif last.get("role") == "user" and (tool := _tool_to_call(body, knobs)):
        text = ""
    else:
        user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        text = default_reply(knobs, content_text(user.get("content")))

    text, stopped_on = _apply_stop(text, body.get("stop"))
    limit = body.get("max_completion_tokens")
    if limit is None:
        limit = body.get("max_tokens")
    tokens, truncated = limit_tokens(split_tokens(text), limit)
    n = body.get("n") if isinstance(body.get("n"), int) and body.get("n") > 1 else 1
    logprobs = bool(body.get("logprobs"))
    top = body.get("top_logprobs") if isinstance(body.get("top_logprobs"), int) else 0
    call_id = "call_" + uuid.uuid4().hex[:24]
    arguments = (scripted[1] if scripted is not None else tool_arguments(knobs)) if tool else ""
    pieces = split_arguments(arguments) if tool else []
    completion_tokens = n * (1 + len(pieces) if tool else len(tokens))
    finish = "tool_calls" if tool else ("length" if truncated else "stop")
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens} if knobs["usage"] else None
    if usage and knobs["cached_tokens"]:
        usage["prompt_tokens_details"] = {"cached_tokens": min(knobs["cached_tokens"], prompt_tokens)}
    if usage and knobs["cache_write_tokens"]:  # OpenAI's name for the prompt cache's writes
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        usage.setdefault("prompt_tokens_details", {})["cache_write_tokens"] = min(knobs["cache_write_tokens"],
                                                                                  prompt_tokens - cached)
    cid = "chatcmpl-" + uuid.uuid4().hex[:24]
    created = int(time.time())

    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": None if tool else "".join(tokens), "refusal": None}
        if tool:
            message["tool_calls"] = [{"id": call_id, "type": "function",
                                      "function": {"name": tool, "arguments": arguments}}]
        choices = []
        for index in range(n):
            choice = {"index": index, "message": message,
                      "logprobs": {"content": [_logprob(t, top) for t in tokens],
                                   "refusal": None} if logprobs else None,
                      "finish_reason": finish}
            if stopped_on is not None:
                choice["stop_reason"] = stopped_on
            choices.append(choice)
        obj = {"id": cid, "object": "chat.completion", "created": created, "model": model,
               "choices": choices, "system_fingerprint": FINGERPRINT}
        if usage:
            obj["usage"] = usage
        return json_reply(obj)

    # Streamed: chunk JSON is built from a fixed prefix so each token costs one json.dumps of its text.
    options = body.get("stream_options")
    include_usage = bool(usage and isinstance(options, dict) and options.get("include_usage"))
    prefix = (f'data: {{"id":"{cid}","object":"chat.completion.chunk","created":{created},"model":{dumps(model)},'
              f'"system_fingerprint":"{FINGERPRINT}","choices":[{{"index":')
    suffix = "}]" + (',"usage":null}' if include_usage else "}") + "\n\n"
    stop_reason = "" if stopped_on is None else f',"stop_reason":{dumps(stopped_on)}'

    def chunk(delta: str, finish_reason: str | None = None, index: int = 0, token: str | None = None) -> bytes:
        reason = "null" if finish_reason is None else f'"{finish_reason}"'
        chosen = "null" if token is None else dumps({"content": [_logprob(token, top)], "refusal": None})
        end = stop_reason if finish_reason is not None else ""
        return f'{prefix}{index},"delta":{delta},"logprobs":{chosen},"finish_reason":{reason}{end}{suffix}'.encode()

    if tool:
        deltas = ['{"tool_calls":[{"index":0,"id":"%s","type":"function","function":{"name":%s,"arguments":""}}]}'
                  % (call_id, dumps(tool))]
        deltas += ['{"tool_calls":[{"index":0,"function":{"arguments":%s}}]}' % dumps(p) for p in pieces]
        texts = [None] * len(deltas)
    else:
        deltas = ['{"content":%s}' % dumps(t) for t in tokens]
        texts = list(tokens) if logprobs else [None] * len(tokens)
    frames, tail = [], []
    for index in range(n):
        frames += [chunk(d, None, index, t) for d, t in zip(deltas[:-1], texts[:-1])]
        if deltas:  # the last token's chunk carries finish_reason
            frames.append(chunk(deltas[-1], finish, index, texts[-1]))
        else:
            tail.append(chunk("{}", finish, index))
    if include_usage:
        tail.append(("data: " + dumps({"id": cid, "object": "chat.completion.chunk", "created": created,
                                       "model": model, "system_fingerprint": FINGERPRINT, "choices": [],
                                       "usage": usage}) + "\n\n").encode())
    tail.append(b"data: [DONE]\n\n")
    head = [chunk('{"role":"assistant","content":""}', None, index) for index in range(n)]
    return Stream(head=head, tokens=frames, tail=tail)


def _apply_stop(text: str, stop: Any) -> tuple[str, str | None]:
    """The text up to the first of the `stop` strings it holds, and that string (vLLM names it in
    the choice's `stop_reason`), or the text whole and None."""
    stops = ([stop] if isinstance(stop, str)
             else [s for s in stop if isinstance(s, str) and s] if isinstance(stop, list) else [])
    found = [(text.find(s), s) for s in stops if s and s in text]
    if not found:
        return text, None
    at, which = min(found)
    return text[:at], which


def _logprob(token: str, top: int) -> dict[str, Any]:
    """A made-up but well-formed log probability of `token`, with `top` alternatives."""
    entry = {"token": token, "logprob": -0.25, "bytes": list(token.encode())}
    return {**entry, "top_logprobs": [{**entry, "logprob": -0.25 - rank} for rank in range(top)]}
