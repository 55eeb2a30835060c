"""The one loop over a chain (gateway/calls/chain.py) and its one attempt record
(gateway/calls/attempts.py): chat, embeddings and audio alike count in the pools' loads and
latencies, get their attempt's span, cool a dead server down and skip it; each model tried is one
`Attempt` told to every observer; and no other module tells the observers' concerns of an attempt."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from gateway.calls import attempts
from gateway.registry import cooldown
from gateway.registry.cooldown import Verdict
from gateway.state import loads
from tests.asgi import call
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelFallbackFactory,
    ModelServerFactory,
    api_key_for,
)
from tests.gateway.telemetry.test_traces import by_kind, exported  # noqa: F401 — the fixture
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

REPO = Path(__file__).resolve().parents[3]

REQUESTS = {  # operation: (path, body for a model named `model`)
    "chat": ("/v1/chat/completions", lambda model: {"model": model, "messages": [{"role": "user", "content": "hi"}]}),
    "embeddings": ("/v1/embeddings", lambda model: {"model": model, "input": ["one", "two"]}),
    "audio": ("/v1/audio/speech", lambda model: {"model": model, "input": "hello there", "voice": "alloy"}),
}


@pytest.fixture
def world(transactional_db, redis_url, upstream, settings):  # noqa: F811
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000}
    settings.SERVER_COOLDOWN_SECONDS = 30
    account = AccountFactory(group=AccountGroupFactory(api_access=True))
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1")
    models = {"chat": ModelFactory(server=server, name="echo-1", is_default=True),
              "embeddings": ModelFactory(server=server, name="embed-1", supports_chat=False, supports_embeddings=True),
              "audio": ModelFactory(server=server, name="voice-1", supports_chat=False, supports_audio=True)}
    yield type("World", (), {"key": api_key_for(account), "models": models})


@pytest.fixture
def told():
    """Every attempt recorded while the test runs, as the observers get it."""
    seen: list[attempts.Attempt] = []
    attempts.observe(seen.append)
    yield seen
    attempts.observers.remove(seen.append)


def ask(key: str, operation: str, model: str) -> tuple[int, bytes]:
    path, body = REQUESTS[operation]
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    status, _headers, content = call("POST", path, headers=headers, body=json.dumps(body(model)).encode())
    return status, content


@pytest.mark.parametrize("operation", sorted(REQUESTS))
def test_every_kind_of_call_counts_in_the_pools_loads_and_latency(world, operation):
    model = world.models[operation]
    assert loads.last_tried(model.pk) == 0 and loads.latency(model.pk) is None
    status, content = ask(world.key, operation, f"oa/{model.name}")
    assert status == 200, content
    assert loads.last_tried(model.pk) > 0  # it was in flight ...
    assert loads.in_flight(model.pk) == 0  # ... and is no more
    assert loads.latency(model.pk) > 0  # its time to first byte, which the `latency` pools read


@pytest.mark.parametrize("operation", sorted(REQUESTS))
def test_every_kind_of_call_has_its_attempts_span(world, exported, operation):  # noqa: F811
    model = world.models[operation]
    status, content = ask(world.key, operation, f"oa/{model.name}")
    assert status == 200, content
    (server,) = by_kind(exported, "SERVER")
    (attempt,) = by_kind(exported, "CLIENT")
    assert attempt.parent.span_id == server.context.span_id
    assert attempt.name == f"{operation} {model.name}"
    assert attempt.attributes["gen_ai.operation.name"] == operation
    assert attempt.attributes["gateway.model"] == f"oa/{model.name}"
    assert attempt.status.status_code.name == "UNSET"


@pytest.mark.parametrize("operation", sorted(REQUESTS))
def test_a_dead_server_is_one_attempt_then_cools_down_and_is_skipped(world, told, closed_port, operation):
    model = world.models[operation]
    dead = ModelFactory(server=ModelServerFactory(name="dead", kind="openai",
                                                  base_url=f"http://127.0.0.1:{closed_port}/v1"),
                        name="gone", supports_chat=model.supports_chat,
                        supports_embeddings=model.supports_embeddings, supports_audio=model.supports_audio)
    ModelFallbackFactory(model=dead, fallback=model)
    assert ask(world.key, operation, "dead/gone")[0] == 200
    first, answered = told
    assert (first.target.public_id, first.operation, first.outcome, first.then, first.next_target.public_id) == (
        "dead/gone", operation, attempts.UNREACHABLE, attempts.NEXT, f"oa/{model.name}")
    assert first.cause.startswith("connect failed") and first.status == 503
    assert (answered.target.public_id, answered.outcome, answered.then, answered.status) == (
        f"oa/{model.name}", attempts.OK, attempts.REPLY, 200)
    assert cooldown.verdict(first.target.server) is Verdict.SKIP  # told to the cooldown

    told.clear()
    assert ask(world.key, operation, "dead/gone")[0] == 200
    skipped, answered = told
    assert (skipped.outcome, skipped.then, skipped.failure.cooldown_cause) == (attempts.SKIPPED, attempts.NEXT, None)
    assert answered.outcome == attempts.OK


def test_a_refusal_off_v1_is_answered_at_once_and_recorded_so(world, told, upstream):  # noqa: F811
    """Native chat answers a provider's refusal with its own status: one attempt, nothing after it."""
    upstream.configure(fail_status=400, fail_times=1)
    headers = [(b"authorization", f"Bearer {world.key}".encode()), (b"content-type", b"application/json")]
    status, _headers, content = call("POST", "/api/v1/chat", headers=headers, body=json.dumps(
        {"model": "oa/echo-1", "message": "hi", "stream": False}).encode())
    assert status == 400, content
    (refused,) = told
    assert (refused.outcome, refused.then, refused.status, refused.next_target) == (
        attempts.REFUSED, attempts.ANSWERED_AT_ONCE, 400, None)
    assert refused.failure.answered and refused.cause.startswith("400 ") and "injected" in refused.cause


# --- Nothing but the observers tells these concerns of an attempt ----------------------------------

TOLD_ONLY_BY_THE_OBSERVERS = {
    ("server_health", "succeeded"), ("server_health", "failed"), ("server_health", "refused"),
    ("cooldown", "record_failure"), ("cooldown", "record_success"),
    ("cooldown", "record_failure_async"), ("cooldown", "record_success_async"),
    ("metrics", "upstream_call"), ("metrics", "fall_through"),
    ("call_facts", "attempted"), ("call_failures", "count"), ("loads", "first_byte"), ("genai", "failed"),
}
OBSERVERS = REPO / "gateway" / "calls" / "attempt_observers.py"


def test_no_module_but_the_attempt_observers_tells_of_an_attempt():
    product = [p for folder in ("accounts", "compat", "gateway", "native", "routines")
               for p in (REPO / folder).rglob("*.py") if "migrations" not in p.parts]
    callers = {}
    for path in product:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) \
                    and (node.func.value.id, node.func.attr) in TOLD_ONLY_BY_THE_OBSERVERS:
                callers.setdefault(path.relative_to(REPO).as_posix(), set()).add(
                    f"{node.func.value.id}.{node.func.attr}")
    assert set(callers) == {OBSERVERS.relative_to(REPO).as_posix()}, callers
    assert len(callers[OBSERVERS.relative_to(REPO).as_posix()]) >= 9
