"""The checks that ask someone else (gateway/guard/model_check.py, webhook.py): a guard model
through the caller handed in at start-up, and the operator's webhook, a real HTTP server on
loopback. Allow, block, redact, and every way of failing under each fail mode."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json

import pytest

from gateway.apps import ask_guard_model
from gateway.guard import Blocked, Finding, Screening, model_check, parse_policy
from tests.servers import free_port, serving


@pytest.fixture
def guard_model():
    """The model check's caller, answering what the test says and keeping what it was asked."""
    state = {"answer": "safe", "delay": 0.0, "error": None, "asked": []}

    async def ask(model: str, messages: list[dict]) -> str:
        state["asked"].append((model, messages))
        await asyncio.sleep(state["delay"])
        if state["error"]:
            raise state["error"]
        return state["answer"]

    model_check.use(ask)
    yield state
    model_check.use(ask_guard_model)


def screened(items, texts, direction="input"):
    screening = Screening(parse_policy(items), group_name="careful", request_id="req-7")

    async def run():
        if direction == "input":
            return await screening.input(texts)
        return await screening.output().whole(texts[0])

    return screening, asyncio.run(run())


def refusal(items, texts, direction="input") -> Blocked:
    with pytest.raises(Blocked) as raised:
        screened(items, texts, direction)
    return raised.value


GUARD = {"check": "model", "model": "local/llama-guard", "timeout": 0.5}
CLASSIFIER = {"check": "model", "model": "small-chat", "on": "both", "timeout": 0.5}


def test_llama_guard_safe_passes_and_unsafe_blocks_with_its_categories(guard_model):
    screening, texts = screened([GUARD], ["How do I bake bread?"])
    assert texts == ["How do I bake bread?"] and screening.findings == []
    assert guard_model["asked"] == [("local/llama-guard", [{"role": "user", "content": "How do I bake bread?"}])]
    guard_model["answer"] = "unsafe\nS1,S10"
    blocked = refusal([GUARD], ["something harmful"])
    assert blocked.finding == Finding("model", "UNSAFE:S1,S10", "block", "input", 0, 0)
    assert blocked.message == "The request was refused by the group's guardrails (model, input)."


def test_a_classifier_prompt_answered_allow_or_block_on_the_reply(guard_model):
    guard_model["answer"] = "ALLOW"
    screening, text = screened([CLASSIFIER], ["A fine reply."], "output")
    assert text == "A fine reply."
    (model, messages) = guard_model["asked"][0]
    assert model == "small-chat" and messages[0]["role"] == "system" and "ALLOW" in messages[0]["content"]
    assert "an AI assistant's reply" in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "<text>\nA fine reply.\n</text>"}
    guard_model["answer"] = "BLOCK."
    blocked = refusal([CLASSIFIER], ["A bad reply."], "output")
    assert blocked.finding == Finding("model", "UNSAFE", "block", "output", 0, 0)
    assert blocked.message == "The reply was stopped by the group's guardrails (model, output)."


def test_llama_guard_judges_a_reply_with_the_request_it_answers(guard_model):
    screening = Screening(parse_policy([{**GUARD, "on": "both"}]), group_name="g", request_id="r")

    async def run():
        await screening.input(["the question"])
        return await screening.output().whole("the answer")

    assert asyncio.run(run()) == "the answer"
    assert guard_model["asked"][1][1] == [{"role": "user", "content": "the question"},
                                          {"role": "assistant", "content": "the answer"}]


def test_log_notes_a_block_verdict_and_goes_on(guard_model):
    guard_model["answer"] = "unsafe\nS2"
    screening, texts = screened([{**GUARD, "action": "log"}], ["text"])
    assert texts == ["text"] and screening.findings == [Finding("model", "UNSAFE:S2", "log", "input", 0, 0)]


@pytest.mark.parametrize("trouble", ["malformed", "timeout", "error", "no caller"])
def test_a_model_that_cannot_answer_fails_closed_or_open(guard_model, trouble):
    if trouble == "malformed":
        guard_model["answer"] = "I think it is probably fine"
    elif trouble == "timeout":
        guard_model["delay"] = 1.0
    elif trouble == "error":
        guard_model["error"] = RuntimeError("every model of the chain failed")
    else:
        model_check.use(None)
    items = [{**GUARD, "timeout": 0.1}]
    blocked = refusal(items, ["text"])
    assert blocked.finding == Finding("model", "GUARD_FAILED", "block", "input", 0, 0)
    assert blocked.message == "The request was refused: the group's guardrails could not check it (model, input)."
    screening, texts = screened([{**items[0], "fail": "open"}], ["text"])
    assert texts == ["text"] and screening.findings == [Finding("model", "GUARD_FAILED", "log", "input", 0, 0)]


class GuardApp:
    """The operator's guard: answers as `reply` says, keeps each request's headers and body."""

    def __init__(self):
        self.reply = (200, {"action": "allow"})
        self.delay = 0.0
        self.seen: list[tuple[dict, bytes]] = []

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.seen.append(({k.decode(): v.decode() for k, v in scope["headers"]}, body))
        await asyncio.sleep(self.delay)
        status, answer = self.reply
        payload = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture
def guard_hook():
    app = GuardApp()
    with serving(app, name="guard-hook") as url:
        app.url = url + "/check"
        yield app


def hook(app, **extra):
    return {"check": "webhook", "on": "both", "url": app.url, "secret": "s3cret", "timeout": 0.5, **extra}


def test_the_webhook_is_signed_and_told_the_call(guard_hook):
    screening, texts = screened([hook(guard_hook)], ["one", "two"])
    assert texts == ["one", "two"] and screening.findings == []
    ((headers, body),) = guard_hook.seen
    assert json.loads(body) == {"direction": "input", "group": "careful", "request_id": "req-7",
                                "texts": ["one", "two"]}
    assert headers["x-svc-signature"] == "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["content-type"] == "application/json"


def test_the_webhook_blocks_or_redacts(guard_hook):
    guard_hook.reply = (200, {"action": "block", "reason": "found the code word"})
    blocked = refusal([hook(guard_hook)], ["the code word"])
    assert blocked.finding == Finding("webhook", "WEBHOOK", "block", "input", 0, 0)
    assert "code word" not in blocked.message
    guard_hook.reply = (200, {"action": "redact", "texts": ["the [hidden]", "two"]})
    screening, texts = screened([hook(guard_hook)], ["the code word", "two"])
    assert texts == ["the [hidden]", "two"]
    assert screening.findings == [Finding("webhook", "WEBHOOK_REDACT", "redact", "input", 0, 0)]
    guard_hook.reply = (200, {"action": "redact", "texts": ["the [hidden]"]})
    screening, reply = screened([hook(guard_hook)], ["a reply"], "output")
    assert reply == "the [hidden]" and json.loads(guard_hook.seen[-1][1])["direction"] == "output"


@pytest.mark.parametrize("trouble", ["status", "not json", "no action", "texts", "timeout", "refused"])
def test_a_webhook_that_cannot_answer_fails_closed_or_open(guard_hook, trouble):
    guard_hook.reply = {
        "status": (500, {"action": "allow"}), "not json": (200, b"<html>ok</html>"),
        "no action": (200, {"verdict": "fine"}), "texts": (200, {"action": "redact", "texts": ["only one"]}),
    }.get(trouble, (200, {"action": "allow"}))
    guard_hook.delay = 1.0 if trouble == "timeout" else 0.0
    item = hook(guard_hook, timeout=0.2)
    if trouble == "refused":
        item["url"] = f"http://127.0.0.1:{free_port()}/check"
    blocked = refusal([item], ["one", "two"])
    assert blocked.finding == Finding("webhook", "GUARD_FAILED", "block", "input", 0, 0)
    screening, texts = screened([{**item, "fail": "open"}], ["one", "two"])
    assert texts == ["one", "two"]
    assert screening.findings == [Finding("webhook", "GUARD_FAILED", "log", "input", 0, 0)]


def test_a_streamed_reply_is_asked_about_in_segments(guard_hook):
    from gateway.guard.stream import REMOTE_SEGMENT

    screening = Screening(parse_policy([hook(guard_hook, on="output")]), group_name="g", request_id="r")
    reply = "word " * (REMOTE_SEGMENT // 2)
    chunk = REMOTE_SEGMENT * 3 // 5

    async def run():
        out = screening.output()
        return [await out.feed(reply[i:i + chunk]) for i in range(0, len(reply), chunk)] + [await out.end()]

    parts = asyncio.run(run())
    assert parts[0] == "" and "".join(parts) == reply
    asked = [json.loads(body)["texts"][0] for _headers, body in guard_hook.seen]
    assert [len(text) for text in asked] == [2 * chunk, 2 * chunk, len(reply) - 4 * chunk]
    assert [text for text in parts if text] == asked
