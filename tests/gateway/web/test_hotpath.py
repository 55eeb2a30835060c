"""The hot routes' handler: the project's ASGI application sends them through
`HotPathHandler` (no `request_started` hop, the response closed in the loop, usage metered from
the loop), and everything else through Django's own handler, with the same answers."""

import asyncio
import json

import pytest
from django.core.signals import request_started

from gateway.web.hotpath import is_hot
from tests.asgi import call, exchange
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelServerFactory,
    RoutineFactory,
    api_key_for,
)
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


@pytest.fixture
def started(monkeypatch):
    seen: list[str] = []

    def receiver(sender, **kwargs):
        seen.append(kwargs.get("scope", {}).get("path", "?"))

    request_started.connect(receiver, dispatch_uid="test-hotpath-started")
    yield seen
    request_started.disconnect(dispatch_uid="test-hotpath-started")


@pytest.fixture
def key(transactional_db, redis_url, upstream):  # noqa: F811
    group = AccountGroupFactory(api_access=True, daily_tokens=1_000_000)
    key = api_key_for(AccountFactory(group=group))
    ModelFactory(server=ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1"),
                 name="echo-1", is_default=True)
    return key


def test_which_routes_are_hot():
    for path in ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/models", "/v1/messages/count_tokens",
                 "/v1/responses/input_tokens", "/api/v1/chat", "/api/v1/hooks/" + "a" * 48):
        assert is_hot(path), path
    for path in ("/admin/", "/api/v1/routines", "/api/v1/usage", "/v1/audio/speech", "/v1/chat/completions/x"):
        assert not is_hot(path), path


HOT_EXAMPLES = ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/models", "/v1/messages/count_tokens",
                "/v1/responses/input_tokens", "/api/v1/chat", "/api/v1/hooks/" + "a" * 48, "/api/v1/hooks/x")


@pytest.mark.parametrize("path", HOT_EXAMPLES)
def test_the_hot_resolver_finds_what_the_urlconf_finds(path):
    from django.test import RequestFactory
    from django.urls import get_resolver

    from gateway.web.hotpath import HotPathHandler

    expected = get_resolver().resolve(path)
    found = HotPathHandler().resolve_request(RequestFactory().post(path))
    assert (found.func, found.args, found.kwargs, found.route, found.url_name) == (
        expected.func, expected.args, expected.kwargs, expected.route, expected.url_name)
    assert len(found.tried) < 9 < len(expected.tried)  # found among the hot routes alone


def test_a_hot_prefix_the_hot_routes_do_not_match_goes_through_the_whole_urlconf(db):
    status, headers, content = call("POST", "/api/v1/hooks/a/b")
    assert (status, json.loads(content)) == (404, {"message": "Not Found."})  # the URLconf's 404
    from django.test import RequestFactory
    from django.urls import Resolver404

    from gateway.web.hotpath import HotPathHandler

    with pytest.raises(Resolver404) as raised:
        HotPathHandler().resolve_request(RequestFactory().post("/api/v1/hooks/a/b"))
    assert raised.value.args[0]["tried"]  # the whole URLconf's routes were tried


def test_a_hot_route_answers_without_request_started_and_meters_from_the_loop(key, started):
    from gateway.limits.quotas import quota_used
    from gateway.models import UsageRecord
    from gateway.usage.writer import usage_writer

    body = json.dumps({"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}]}).encode()
    auth = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json"),
            (b"x-request-id", b"hot-1")]
    status, headers, content = call("POST", "/v1/chat/completions", body=body, headers=auth)
    assert status == 200, content
    assert headers[b"X-Request-Id"] == b"hot-1" and headers[b"Cache-Control"] == b"no-store"
    assert b"X-RateLimit-Remaining" in headers and b"X-Inference-Request-Id" in headers
    reply = json.loads(content)
    assert reply["object"] == "chat.completion"
    assert started == []  # no request_started (and so no thread hop for it)
    usage_writer.flush()
    (record,) = UsageRecord.objects.filter(request_id="hot-1")
    assert record.input_tokens + record.output_tokens == reply["usage"]["total_tokens"]
    day = dict((w.period, used) for w, used in quota_used(account_id=record.account_id).tokens)["day"]
    assert day == reply["usage"]["total_tokens"]  # the counter was added to, once


def test_a_synchronous_hot_views_response_is_closed_in_the_views_thread(key, monkeypatch):
    """/v1/models is a synchronous view: its thread's database connection goes back to the pool
    only when the response is closed in that thread (request_finished), so it is closed there."""
    import threading

    from django.http.response import HttpResponseBase

    import compat.views

    threads = {}
    real_targets, real_close = compat.views.usable_targets, HttpResponseBase.close

    def targets(*args, **kwargs):
        threads["view"] = threading.get_ident()
        return real_targets(*args, **kwargs)

    def close(self):
        threads["close"] = threading.get_ident()
        real_close(self)

    monkeypatch.setattr(compat.views, "usable_targets", targets)
    monkeypatch.setattr(HttpResponseBase, "close", close)
    status, _, content = call("GET", "/v1/models", headers=[(b"authorization", f"Bearer {key}".encode())])
    assert status == 200, content
    assert threads["close"] == threads["view"] != threading.get_ident()


def test_any_other_route_goes_through_djangos_handler(key, started):
    status, headers, _ = call("GET", "/api/v1/version", headers=[(b"authorization", f"Bearer {key}".encode())])
    assert status == 200 and headers[b"Cache-Control"] == b"no-store"
    assert started == ["/api/v1/version"]


def test_the_web_process_freezes_what_it_loaded_and_collects_less_often(settings):
    """gateway/asgi.py tunes the cyclic garbage collector (p99 under load: bench/README.md)."""
    import gc

    assert settings.GC_THRESHOLDS == (50_000, 20, 100)
    assert gc.get_threshold() == settings.GC_THRESHOLDS  # gateway.asgi was imported above
    assert gc.get_freeze_count() > 10_000  # Django, the apps and their modules


CYCLE_CASES = {
    "chat": ("/v1/chat/completions", {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}]}),
    "chat stream": ("/v1/chat/completions", {"model": "oa/echo-1", "stream": True,
                                             "messages": [{"role": "user", "content": "hi"}]}),
    "messages": ("/v1/messages", {"model": "oa/echo-1", "max_tokens": 16,
                                  "messages": [{"role": "user", "content": "hi"}]}),
    "native chat": ("/api/v1/chat", {"message": "hi"}),  # a stream, the default
    "refused": ("/v1/chat/completions", {"model": "oa/no-such-model", "messages": [{"role": "user", "content": "hi"}]}),
    "webhook": (None, {"event": "push"}),
}


@pytest.fixture
def hook_path(key):
    from accounts.models import Account
    from routines.routine_writes import new_token

    routine = RoutineFactory(account=Account.objects.get(), name="Hook", prompt="Summarize.", trigger="webhook",
                             delivery_targets=["inapp"], webhook_token=new_token())
    return f"/api/v1/hooks/{routine.webhook_token}"


@pytest.mark.parametrize("case", CYCLE_CASES)
def test_a_hot_call_leaves_no_reference_cycle_behind(key, hook_path, case, settings):
    """Every object of a call is freed when the call ends, by reference counting. A cycle (one
    was Django's handler re-raising the disconnect watch's RequestAborted: the exception's
    traceback held the handler's frame, which held the task, which held the exception) keeps
    the whole request (~90 objects) until the cyclic collector runs, and its pauses were the p99
    at c=16 (bench/README.md)."""
    import gc

    path, payload = CYCLE_CASES[case]
    path = path or hook_path
    settings.RATE_LIMITS = {name: 1000 for name in settings.RATE_LIMITS}  # 23 calls, none refused
    settings.WEBHOOK_EVENTS_PER_MINUTE = 1000
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]

    async def calls(n: int) -> list[int]:
        statuses = []
        for _ in range(n):
            sent = await exchange("POST", path, body=json.dumps(payload).encode(), headers=headers)
            statuses.append(sent[0]["status"])
        return statuses

    async def batch() -> tuple[list[int], int]:
        gc.collect()
        gc.disable()
        try:
            statuses = await calls(10)
            return statuses, gc.collect()
        finally:
            gc.enable()

    async def measured() -> list[tuple[list[int], int]]:
        await calls(3)  # first calls fill caches
        return [await batch(), await batch()]

    batches = asyncio.run(measured())
    assert {status for statuses, _ in batches for status in statuses} == ({404} if case == "refused" else {200})
    # A cycle made by every call shows in both batches; a one-off one (a broker connection the
    # Celery producer pool opens anew) in one of them at most.
    assert 0 in [unreachable for _, unreachable in batches], batches
