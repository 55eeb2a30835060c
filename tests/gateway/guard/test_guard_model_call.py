"""The model check's caller the gateway registers at start-up (gateway/apps.py `ask_guard_model`):
a registry model asked through its routing, whatever the guarded group may use, its answer read as
the guard's verdict."""

from __future__ import annotations

import asyncio

import pytest

from gateway.guard import Blocked, Finding, Screening, parse_policy
from gateway.registry.snapshot import registry
from tests.factories import ModelFactory, ModelServerFactory
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


@pytest.fixture
def guard_model(upstream, redis_url, db):  # noqa: F811
    server = ModelServerFactory(name="local", kind="openai", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="llama-guard")
    registry()  # this process's copy, read here: the guard's planning hops to a worker thread
    return upstream


def screen(policy_items, texts):
    screening = Screening(parse_policy(policy_items), group_name="careful", request_id="req-9")
    return screening, asyncio.run(screening.input(texts))


GUARD = {"check": "model", "model": "local/llama-guard", "timeout": 5}


def test_the_registry_model_is_asked_and_its_verdict_read(guard_model):
    guard_model.configure(reply="safe")
    screening, texts = screen([GUARD], ["How do I bake bread?"])
    assert texts == ["How do I bake bread?"] and screening.findings == []
    (request,) = guard_model.requests
    assert request.json["messages"] == [{"role": "user", "content": "How do I bake bread?"}]
    assert request.json["max_tokens"] == 20 and request.json["temperature"] == 0
    guard_model.configure(reply="unsafe\nS9")
    with pytest.raises(Blocked) as raised:
        screen([GUARD], ["something"])
    assert raised.value.finding == Finding("model", "UNSAFE:S9", "block", "input", 0, 0)


def test_an_unknown_guard_model_is_a_guard_failure(guard_model):
    with pytest.raises(Blocked) as raised:
        screen([{**GUARD, "model": "local/nothing"}], ["text"])
    assert raised.value.finding.entity == "GUARD_FAILED"
    screening, texts = screen([{**GUARD, "model": "local/nothing", "fail": "open"}], ["text"])
    assert texts == ["text"] and [f.action for f in screening.findings] == ["log"]
