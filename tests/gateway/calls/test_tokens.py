"""gateway/calls/tokens.py: o200k_base counts from a tokenizer that ships inside its package.

The known counts were cross-checked against OpenAI's tiktoken 0.14 reading the o200k_base file
whose SHA-256 OpenAI publishes (446a9538…1a2d)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.calls.tokens import (
    ATTACHMENT_TOKENS,
    REPLY_PRIMER,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    count_chat_completion_text,
    count_chat_request,
    count_text,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("hello world", 2),
        ("Hello, world!", 4),
        ("The quick brown fox jumps over the lazy dog.", 10),
        ("def f(x):\n    return x * 2\n", 11),
        ("<|endoftext|>", 7),  # a special token's look-alike in user text is plain text
    ],
)
def test_known_counts(text, tokens):
    assert count_text(text) == tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("🧠", 3), ("Ünïcödé 🧠 日本語のテキスト", 14), ("Grüße aus Köln — ça va?", 9)],
)
def test_unicode(text, tokens):
    assert count_text(text) == tokens


def test_empty_input():
    assert count_text("") == 0
    assert count_chat_completion_text("") == 0
    assert count_chat_request({}) == 0
    assert count_chat_request({"messages": []}) == 0


def test_reply_text_counts_like_any_text():
    assert count_chat_completion_text("The quick brown fox jumps over the lazy dog.") == 10


def test_long_text_counts_in_proportion():
    assert count_text("hello world " * 1000) == 2001  # "hello", then " world" and " hello" each one


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
CHAT = {
    "model": "local/llama3.1:8b",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "name": "ann",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 4000}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"},
    ],
    "tools": TOOLS,
}


def test_chat_request_with_tools_and_an_image():
    assert count_chat_request(CHAT) == 167


def test_chat_request_is_the_sum_of_its_parts():
    tools_json = '[{"type":"function","function":{"name":"get_weather","description":"Current weather",' \
                 '"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]'
    expected = (
        4 * TOKENS_PER_MESSAGE + REPLY_PRIMER
        + count_text("system") + count_text("You are terse.")
        + count_text("user") + count_text("ann") + TOKENS_PER_NAME + count_text("What is in this picture?")
        + ATTACHMENT_TOKENS  # the image's base64 is not counted as text
        + count_text("assistant") + count_text("get_weather") + count_text('{"city":"Paris"}')
        + count_text("tool") + count_text("Sunny, 21 C")
        + count_text(tools_json)
    )
    assert count_chat_request(CHAT) == expected


def test_each_image_counts_a_fixed_amount():
    one = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}
    two = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}] * 2}]}
    assert count_chat_request(two) - count_chat_request(one) == ATTACHMENT_TOKENS == 85


def test_anthropic_messages_shape():
    body = {
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                                         {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather",
                                               "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"}]},
        ],
    }
    expected = (
        4 * TOKENS_PER_MESSAGE + REPLY_PRIMER
        + count_text("system") + count_text("You are terse.")
        + count_text("user") + count_text("Weather?") + ATTACHMENT_TOKENS
        + count_text("assistant") + count_text("get_weather") + count_text('{"city":"Paris"}')
        + count_text("user") + count_text("Sunny")
    )
    assert count_chat_request(body) == expected


@pytest.mark.parametrize(
    "body",
    [None, [], {"messages": "hi"}, {"messages": [None, 3, "x"]}, {"messages": [{"role": 1, "content": {"a": 1}}]}],
)
def test_malformed_bodies_do_not_raise(body):
    assert count_chat_request(body) >= 0


NO_NETWORK = """
import socket, sys

def refuse(*args, **kwargs):
    raise OSError("network access attempted")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

from gateway.calls.tokens import count_chat_request, count_text
assert count_text("hello world") == 2
assert count_chat_request({"messages": [{"role": "user", "content": "hello world"}]}) == 9
print("counted offline")
"""


def test_counts_without_network_or_cache(tmp_path):
    """A fresh process with sockets disabled and an empty tiktoken cache counts all the same:
    the encoding ships in the package."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_PROXY") and not k.endswith("_proxy")}
    env.update(TIKTOKEN_CACHE_DIR=str(tmp_path), DATA_GYM_CACHE_DIR=str(tmp_path), HOME=str(tmp_path),
               HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    result = subprocess.run(
        [sys.executable, "-c", NO_NETWORK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "counted offline" in result.stdout
    assert list(tmp_path.iterdir()) == []  # nothing cached or written either
