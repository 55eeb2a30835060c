"""Token counting (docs/design.md, "Token counting"): for the count-tokens endpoints and for metering a
reply whose model server reported no usage.

The tokenizer is `toktok` (package `toktok-rs`): OpenAI's BPE encodings compiled into the
extension module, so nothing is read from disk or fetched from the network, ever — unlike
`tiktoken`, which downloads its BPE files on first use. Its counts are identical to tiktoken's.
The encoding is `o200k_base` (GPT-4o, GPT-4.1, GPT-5, the o-series). It is loaded once per
process on the first count (about 0.4 s and 60 MB), then cached by toktok.

A count is exact for OpenAI's models and an estimate for every other model (Llama, Qwen,
Claude … have tokenizers of their own); that is what a gateway in front of many servers can
promise without shipping every model's tokenizer.

Counting a batch costs a fixed ~35 µs plus ~1 µs per KB, so a request's pieces are counted in
one batch.
"""

from __future__ import annotations

import json

import toktok

ENCODING = "o200k_base"

# OpenAI's documented overhead for its chat models: every message is wrapped in 3 tokens, a
# message's `name` costs 1 more, and the reply is primed with 3.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMER = 3
# A part that is not text (an image, audio, a file) counts a fixed amount: OpenAI's price of one
# low-detail image. Its real cost depends on the model and the size; the bytes are not text.
ATTACHMENT_TOKENS = 85

_TEXT_PARTS = frozenset({"text", "input_text", "output_text", "refusal"})


def _count_all(texts: list[str]) -> int:
    texts = [t for t in texts if t]
    if not texts:
        return 0
    return sum(toktok.batch_count(texts, ENCODING, threads=1))


def count_text(text: str) -> int:
    """Tokens of a text, special-token look-alikes such as `<|endoftext|>` counted as plain text."""
    return _count_all([text]) if text else 0


def count_chat_completion_text(text: str) -> int:
    """Output tokens of a reply text. The same as `count_text` (a reply has no message overhead);
    a name of its own so that metering code says what it counts."""
    return count_text(text)


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _content(content, texts: list[str]) -> int:
    """Adds the text of a message's content to `texts`; returns the fixed tokens of its attachments.
    Takes a string, a list of OpenAI content parts, or a list of Anthropic content blocks."""
    if isinstance(content, str):
        texts.append(content)
        return 0
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return 0
    fixed = 0
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            for key in ("text", "refusal"):
                if isinstance(part.get(key), str):
                    texts.append(part[key])
        elif kind == "tool_use":  # Anthropic: a call the assistant made
            texts.append(str(part.get("name") or ""))
            texts.append(_json(part.get("input", {})))
        elif kind == "tool_result":  # Anthropic: the answer to a call
            fixed += _content(part.get("content"), texts)
        else:  # image_url, input_audio, file, image, document …
            fixed += ATTACHMENT_TOKENS
    return fixed


def _calls(message: dict, texts: list[str]) -> None:
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                _function(function, texts)
    if isinstance(message.get("function_call"), dict):  # the legacy single call
        _function(message["function_call"], texts)


def _function(function: dict, texts: list[str]) -> None:
    for key in ("name", "arguments"):
        value = function.get(key)
        if isinstance(value, str):
            texts.append(value)
        elif value is not None:
            texts.append(_json(value))


def count_chat_request(body: dict) -> int:
    """Input tokens of a chat-completions request body.

    Counted: each message's role, name and content (text parts; every image, audio or file part a
    fixed ATTACHMENT_TOKENS), the tool calls of assistant messages (function name and arguments),
    3 tokens of wrapping per message (+1 with a name), 3 for the reply primer when there is a
    message, and the tool definitions (`tools`, legacy `functions`) as compact JSON.

    The Anthropic Messages shape counts too, so `/v1/messages/count_tokens` can pass its body as
    it is: a top-level `system` (string or text blocks) is one more message, and content blocks
    `text`, `image`, `tool_use` (name + JSON input) and `tool_result` are understood.

    A malformed body is counted as far as it makes sense (validation is the caller's job); an
    empty one is 0.
    """
    if not isinstance(body, dict):
        return 0
    texts: list[str] = []
    fixed = 0
    messages = body.get("messages")
    messages = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    system = body.get("system")
    if isinstance(system, (str, list)) and system:
        messages = [{"role": "system", "content": system}, *messages]
    for message in messages:
        fixed += TOKENS_PER_MESSAGE
        if isinstance(message.get("role"), str):
            texts.append(message["role"])
        if isinstance(message.get("name"), str):
            texts.append(message["name"])
            fixed += TOKENS_PER_NAME
        fixed += _content(message.get("content"), texts)
        _calls(message, texts)
    if messages:
        fixed += REPLY_PRIMER
    for key in ("tools", "functions"):
        if body.get(key):
            texts.append(_json(body[key]))
    return fixed + _count_all(texts)

