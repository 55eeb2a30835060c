"""A finding of a group's guardrails is an event on the request's span (through the project's ASGI
application, spans kept in memory): which check, what it found, the action and where, never the text."""

from __future__ import annotations

from tests.compat.guard_support import AWS_KEY, BLOCK, PROMPT, guard
from tests.gateway.telemetry.test_traces import chat, events, exported, world  # noqa: F401 — the fixtures
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


def test_a_finding_is_an_event_of_the_requests_span(world, exported):  # noqa: F811
    guard(world.group, BLOCK)
    status, _, body = chat(world.key, text=PROMPT)
    assert status == 400 and body["error"]["code"] == "content_policy_violation"
    (server,) = exported.get_finished_spans()
    event = events(server)["gateway.guard"]
    assert event == {"gateway.guard.check": "secrets", "gateway.guard.entity": "AWS_ACCESS_KEY",
                     "gateway.guard.action": "block", "gateway.guard.direction": "input",
                     "gateway.guard.index": 0, "gateway.guard.offset": PROMPT.index(AWS_KEY)}
