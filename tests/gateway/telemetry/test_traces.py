"""Traces in this process, through the project's ASGI application with an in-memory span
exporter in place of OTLP's: nothing set up without the standard variables, a cooldown skip, a cache
hit, a budget and a quota refusal as events, the prompt and reply on a span only for a group that keeps
them (redacted), log lines joined to their spans, and a schedule's trace starting at the worker.
The OTLP export itself, across processes: test_traces_export.py and tests/routines/test_traces.py."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from accounts.models import AccountGroup
from gateway.telemetry import request_spans, tracing
from tests.asgi import call
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelFallbackFactory,
    ModelServerFactory,
    api_key_for,
)
from tests.gateway.telemetry.test_json_logs import json_log  # noqa: F401 — the fixture
from tests.servers import child_env
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

SECRET = "sk-live-" + "a1B2c3D4e5F6g7H8i9J0" * 2  # shaped like an API key: redacted wherever text is kept


@pytest.fixture
def exported():
    """Traces on, spans kept in memory; off again at the end."""
    exporter = InMemorySpanExporter()
    assert request_spans.start(SimpleSpanProcessor(exporter))
    yield exporter
    request_spans.stop()
    assert not tracing.ENABLED


@pytest.fixture
def world(transactional_db, redis_url, upstream, settings):  # noqa: F811
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000}
    group = AccountGroupFactory(api_access=True)
    account = AccountFactory(group=group)
    model = ModelFactory(server=ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1"),
                         name="echo-1", is_default=True)
    return type("World", (), {"group": group, "account": account, "key": api_key_for(account), "model": model})


def chat(key: str, model: str = "oa/echo-1", text: str = "trace me", **fields):
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    status, answered, body = call("POST", "/v1/chat/completions", headers=headers, body=json.dumps(
        {"model": model, "messages": [{"role": "user", "content": text}], **fields}).encode())
    return status, {name.decode().lower(): value.decode() for name, value in answered.items()}, json.loads(body)


def by_kind(exporter, kind: str):
    return [s for s in exporter.get_finished_spans() if s.kind.name == kind]


def events(span) -> dict[str, dict]:
    return {event.name: dict(event.attributes) for event in span.events}


def test_without_the_variables_nothing_is_set_up_nor_imported():
    assert not tracing.wanted({})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert not tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"})
    assert not tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"})
    assert tracing.protocol_problem({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) is not None
    assert tracing.protocol_problem({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}) is None
    # A web process as the Procfile starts it, with no OTEL_* variable: its application built, its start-up
    # steps run, one request served; neither the SDK's tracing nor an exporter is even imported (redis-py
    # imports the SDK's metrics for its own observability, which stays off).
    env = {name: value for name, value in child_env().items() if not name.startswith("OTEL_")}
    probe = ("import asyncio, sys, gateway.asgi\n"
             "from tests.asgi import call\n"
             "status = call('GET', '/livez')[0]\n"
             "from gateway.telemetry import tracing\n"
             "kinds = ('opentelemetry.sdk.trace', 'opentelemetry.exporter')\n"
             "loaded = sorted(m for m in sys.modules if m.startswith(kinds))\n"
             "print(status, tracing.ENABLED, tracing.tracer, loaded)\n")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "200 False None []", out.stderr[-2000:]


def test_a_grpc_protocol_is_refused_with_a_warning_and_leaves_traces_off(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert tracing.start() is False and not tracing.ENABLED
    assert "only 'http/protobuf' is supported" in caplog.text


def test_scrapes_and_probes_are_not_traced(world, exported):
    assert call("GET", "/livez")[0] == 200
    assert call("GET", "/metrics")[0] in (200, 401, 403)
    assert exported.get_finished_spans() == ()
    assert chat(world.key)[0] == 200
    assert {s.name for s in by_kind(exported, "SERVER")} == {"POST /v1/chat/completions"}


def test_a_server_cooling_down_is_an_attempt_span_with_a_cooldown_skip_event(world, exported, closed_port):
    dead = ModelFactory(name="gone", server=ModelServerFactory(
        name="dead", kind="openai", base_url=f"http://127.0.0.1:{closed_port}/v1"))
    ModelFallbackFactory(model=dead, fallback=world.model)
    assert chat(world.key, "dead/gone")[0] == 200  # unreachable: the server cools down
    exported.clear()
    status, headers, _ = chat(world.key, "dead/gone")
    assert status == 200
    (server,) = by_kind(exported, "SERVER")
    skipped, answered = sorted(by_kind(exported, "CLIENT"), key=lambda s: s.start_time)
    assert skipped.parent.span_id == answered.parent.span_id == server.context.span_id
    assert skipped.attributes["error.type"] == "skipped" and skipped.status.status_code.name == "ERROR"
    assert set(events(skipped)) == {"gateway.cooldown_skip", "gateway.fall_through"}
    assert events(skipped)["gateway.fall_through"] == {"gateway.next_model": "oa/echo-1"}
    assert answered.status.status_code.name == "UNSET" and answered.attributes["gen_ai.response.model"] == "echo-1"
    assert server.attributes["gateway.request_id"] == headers["x-request-id"]


def test_a_cache_hit_is_an_event_of_the_request_and_no_model_span(world, exported):
    world.group.response_cache_ttl = 60
    world.group.save()
    assert chat(world.key)[1]["x-cache"] == "miss"
    exported.clear()
    status, headers, _ = chat(world.key)
    assert (status, headers["x-cache"]) == (200, "hit")
    (server,) = exported.get_finished_spans()
    assert server.attributes["gateway.cache.hit"] is True and "gateway.cache_hit" in events(server)


def test_a_spent_budget_and_a_used_up_quota_are_refusal_events_of_the_request(world, exported):
    group = AccountGroup.objects.get(pk=world.group.pk)
    group.daily_budget = Decimal("0")
    group.save()
    status, _, body = chat(world.key)
    assert status == 403 and body["error"]["message"].startswith("Budget reached")
    (server,) = exported.get_finished_spans()  # refused before any model: no attempt span
    assert events(server)["gateway.budget_refused"]["gateway.budget.period"] == "day"
    assert server.attributes["http.response.status_code"] == 403
    assert server.attributes["gateway.error.code"] == "permission_denied"
    assert server.status.status_code.name == "UNSET"  # a refusal is the client's, not a server error
    group.daily_budget, group.daily_tokens = Decimal("-1"), 0
    group.save()
    exported.clear()
    assert chat(world.key)[0] == 403
    (server,) = exported.get_finished_spans()
    assert events(server)["gateway.quota_refused"]["gateway.quota.period"] == "day"


def test_the_prompt_and_reply_are_on_the_span_only_for_a_group_that_keeps_them_and_redacted(world, exported):
    chat(world.key, text=f"my key is {SECRET}")
    (answered,) = by_kind(exported, "CLIENT")
    assert not any(name.startswith("gen_ai.input") or name.startswith("gen_ai.output") for name in answered.attributes)
    world.group.capture_calls = True
    world.group.save()
    exported.clear()
    status, _, reply = chat(world.key, text=f"my key is {SECRET}")
    assert status == 200
    (answered,) = by_kind(exported, "CLIENT")
    sent = json.loads(answered.attributes["gen_ai.input.messages"])
    assert sent[0]["role"] == "user" and sent[0]["parts"][0]["content"].startswith("my key is ")
    assert SECRET not in answered.attributes["gen_ai.input.messages"]
    assert SECRET not in answered.attributes["gen_ai.output.messages"]
    got = json.loads(answered.attributes["gen_ai.output.messages"])
    assert got[0]["role"] == "assistant" and got[0]["parts"][0]["content"].startswith("Echo: my key is ")
    (server,) = by_kind(exported, "SERVER")
    assert server.end_time >= answered.end_time > answered.start_time


def test_every_log_line_written_in_a_span_carries_its_trace_and_span_ids(world, exported, json_log, closed_port):  # noqa: F811
    dead = ModelFactory(name="gone", server=ModelServerFactory(
        name="dead", kind="openai", base_url=f"http://127.0.0.1:{closed_port}/v1"))
    ModelFallbackFactory(model=dead, fallback=world.model)
    status, headers, _ = chat(world.key, "dead/gone")
    assert status == 200
    (server,) = by_kind(exported, "SERVER")
    trace_id, span_id = format(server.context.trace_id, "032x"), format(server.context.span_id, "016x")
    lines = [line for line in json_log() if line.get("request_id") == headers["x-request-id"]]
    fall_through = next(line for line in lines if line.get("event") == "fall_through")
    (request_line,) = [line for line in lines if line["logger"] == "gateway.requests"]
    for line in (fall_through, request_line):
        assert (line["trace_id"], line["span_id"]) == (trace_id, span_id)


def test_with_traces_off_no_log_line_carries_trace_ids(world, json_log):  # noqa: F811
    status, headers, _ = chat(world.key)
    assert status == 200
    lines = [line for line in json_log() if line.get("request_id") == headers["x-request-id"]]
    assert lines and not any("trace_id" in line for line in lines)


@pytest.fixture
def eager_tasks():
    from gateway.celery import app as celery_app

    before = celery_app.conf.CELERY_TASK_ALWAYS_EAGER
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = True
    yield
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = before


def test_a_schedules_run_is_a_trace_that_starts_at_the_worker(world, exported, eager_tasks):
    """The beat's tick carries no context: the task that finds due schedules is a root span, and the
    runs it queues (run inline here: eager tasks), their model calls and deliveries are its children."""
    from django.utils import timezone

    from routines import tasks
    from tests.factories import RoutineFactory

    RoutineFactory(account=world.account, name="Nightly", prompt="Summarize the night.", trigger="schedule",
                   schedule="* * * * *", next_run_at=timezone.now(), delivery_targets=["inapp"])
    tasks.run_due_schedules.apply()
    spans = exported.get_finished_spans()
    (tick,) = [s for s in spans if s.name == "routines.tasks.run_due_schedules"]
    assert tick.parent is None and tick.kind.name == "CONSUMER"
    (run,) = [s for s in spans if s.name == "routines.tasks.execute_routine_run"]
    assert run.parent.span_id == tick.context.span_id and run.attributes["gateway.run.trigger"] == "schedule"
    (model_call,) = by_kind(exported, "CLIENT")
    assert model_call.parent.span_id == run.context.span_id
    assert model_call.attributes["gen_ai.usage.output_tokens"] > 0
    (delivery,) = [s for s in spans if s.name == "routines.tasks.deliver_run_target"]
    assert delivery.parent.span_id == run.context.span_id
    assert {s.context.trace_id for s in spans} == {tick.context.trace_id}


def test_an_e_mails_run_is_a_trace_that_starts_at_the_worker(world, exported, eager_tasks,
                                                             django_capture_on_commit_callbacks):
    """A message handed over by the mail server (`receive_email`) is no request: its run's task span is
    a root, and its model call and delivery are in its trace."""
    from routines.inbound_email import address_for, receive_message
    from tests.factories import RoutineFactory

    routine = RoutineFactory(account=world.account, name="Mail", prompt="Answer the mail.", trigger="email",
                             delivery_targets=["inapp"])
    raw = (f"From: someone@example.test\r\nTo: {address_for(routine)}\r\nSubject: hello\r\n"
           "Message-ID: <m1@example.test>\r\n\r\nthe body\r\n").encode()
    with django_capture_on_commit_callbacks(execute=True):
        (answer,) = receive_message(raw).answers
    assert answer[1] == 200 and answer[2]["queued"] is True
    spans = exported.get_finished_spans()
    (run,) = [s for s in spans if s.name == "routines.tasks.execute_routine_run"]
    assert run.parent is None and run.attributes["gateway.run.trigger"] == "email"
    (model_call,) = by_kind(exported, "CLIENT")
    assert model_call.parent.span_id == run.context.span_id
    (delivery,) = [s for s in spans if s.name == "routines.tasks.deliver_run_target"]
    assert delivery.parent.span_id == run.context.span_id


def test_an_anthropic_servers_own_events_give_the_span_its_counts_and_stop_reason(world, exported, upstream):  # noqa: F811
    ModelFactory(server=ModelServerFactory(name="an", kind="anthropic", base_url=upstream.url), name="claude-echo")
    headers = [(b"authorization", f"Bearer {world.key}".encode()), (b"content-type", b"application/json")]
    status, _, body = call("POST", "/v1/messages", headers=headers, body=json.dumps(
        {"model": "an/claude-echo", "max_tokens": 64,
         "messages": [{"role": "user", "content": "four words right here"}]}
    ).encode())
    assert status == 200, body
    reply = json.loads(body)
    (answered,) = by_kind(exported, "CLIENT")
    assert answered.name == "chat claude-echo" and answered.attributes["gen_ai.provider.name"] == "anthropic"
    assert answered.attributes["gen_ai.request.max_tokens"] == 64
    assert answered.attributes["gen_ai.usage.input_tokens"] == reply["usage"]["input_tokens"] > 0
    assert answered.attributes["gen_ai.usage.output_tokens"] == reply["usage"]["output_tokens"] > 0
    assert answered.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    (server,) = by_kind(exported, "SERVER")
    assert server.name == "POST /v1/messages"
