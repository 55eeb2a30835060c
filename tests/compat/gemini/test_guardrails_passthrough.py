"""A group's guardrails on a generateContent request passed through, untranslated, to a server that speaks
Gemini's format (the stand-in kind module of test_passthrough.py): the body the server gets has its texts
redacted (system instruction, parts, a function's response), everything else as sent, and the server's own
chunks come back with the client's values restored."""

from __future__ import annotations

import json

import pytest

from tests.compat.gemini import test_passthrough as passthrough
from tests.compat.gemini.test_passthrough import post, sse_chunks, world  # noqa: F401 — the fixture
from tests.compat.guard_support import AWS_KEY, BLOCK, EMAIL, PROMPT, REDACT, assert_redacted, guard

BODY = {"systemInstruction": {"parts": [{"text": f"the customer is {EMAIL}"}]},
        "contents": [{"role": "user", "parts": [{"text": PROMPT}]},
                     {"role": "model", "parts": [{"functionCall": {"name": "crm", "args": {"q": "x"}}}]},
                     {"role": "user", "parts": [{"functionResponse": {"name": "crm", "response": {"mail": EMAIL}}}]}],
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]}
ECHOED = [{"candidates": [{"content": {"role": "model", "parts": [{"text": "Writing to <EMAIL_"}]}}]},
          {"candidates": [{"content": {"role": "model", "parts": [{"text": "ADDRESS_1> now."}]},
                           "finishReason": "STOP"}],
           "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}}]


@pytest.fixture
def echoing(world, monkeypatch):  # noqa: F811
    monkeypatch.setattr(passthrough, "CHUNKS", ECHOED)
    return world


def test_the_passed_through_body_is_redacted_and_the_reply_restored(echoing):
    guard(echoing.group, REDACT)
    status, _, content = post(echoing, "streamGenerateContent", body=BODY, query="?alt=sse")
    assert status == 200, content
    [sent] = echoing.kind.bodies
    assert_redacted(json.dumps(sent))
    assert sent["safetySettings"] == BODY["safetySettings"]
    assert sent["contents"][1] == BODY["contents"][1]
    text = "".join(p["text"] for c in sse_chunks(content) for p in c["candidates"][0]["content"]["parts"])
    assert text == f"Writing to {EMAIL} now."
    status, _, content = post(echoing, "generateContent", body=BODY)
    assert json.loads(content)["candidates"][0]["content"]["parts"] == [{"text": f"Writing to {EMAIL} now."}]


def test_a_blocked_body_reaches_no_server(world):  # noqa: F811
    guard(world.group, BLOCK)
    status, _, content = post(world, "generateContent", body=BODY)
    assert status == 400
    error = json.loads(content)["error"]
    assert error["status"] == "INVALID_ARGUMENT" and AWS_KEY not in error["message"]
    assert world.kind.bodies == []
