"""GET /metrics: Prometheus' text format, every process's values added up
(multiprocess mode), served with a bearer token or to loopback clients only; label values are
route patterns and registry names, never a path."""

import json
import os
import subprocess
import sys
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.telemetry import metrics_files
from gateway.usage.spool import Spool
from gateway.usage.writer import usage_writer
from tests.asgi import call
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.servers import ROOT, child_env
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


def scrape(*, client: str = "127.0.0.1", headers=()) -> tuple[int, dict[bytes, bytes], bytes]:
    """GET /metrics through the project's ASGI application, from `client` (header names lowercased)."""
    status, sent_headers, body = call("GET", "/metrics", headers=headers, client=client)
    return status, {name.lower(): value for name, value in sent_headers.items()}, body


def samples() -> dict[tuple[str, tuple], float]:
    status, headers, body = scrape()
    assert status == 200, body
    assert headers[b"content-type"].startswith(b"text/plain; version=0.0.4")
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found, name: str, **labels) -> float:
    return found.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))), 0.0)


@pytest.fixture
def key(transactional_db, redis_url, upstream, settings):  # noqa: F811
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000, "hooks": 1000}
    group = AccountGroupFactory(api_access=True, daily_tokens=1_000_000)
    key = api_key_for(AccountFactory(group=group))
    ModelFactory(server=ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1"),
                 name="echo-1", is_default=True)
    return key


def chat(key: str, model: str = "oa/echo-1") -> tuple[int, dict, dict]:
    status, headers, body = call("POST", "/v1/chat/completions", body=json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "count me"}]}).encode(),
        headers=[(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json"),
                 (b"accept", b"application/json")])
    return status, headers, json.loads(body)


def test_it_counts_a_call_its_latency_its_upstream_outcome_and_its_tokens(key):
    before = samples()
    status, _, reply = chat(key)
    assert status == 200, reply
    after = samples()
    route = {"route": "v1/chat/completions"}
    assert value(after, "gateway_http_requests_total", method="POST", status=200, **route) == \
        value(before, "gateway_http_requests_total", method="POST", status=200, **route) + 1
    assert value(after, "gateway_http_request_duration_seconds_count", **route) == \
        value(before, "gateway_http_request_duration_seconds_count", **route) + 1
    assert value(after, "gateway_http_request_duration_seconds_sum", **route) > \
        value(before, "gateway_http_request_duration_seconds_sum", **route)
    assert value(after, "gateway_http_request_duration_seconds_bucket", le="+Inf", **route) == \
        value(after, "gateway_http_request_duration_seconds_count", **route)
    upstream_ok = {"server": "oa", "model": "oa/echo-1", "outcome": "ok"}
    assert value(after, "gateway_upstream_calls_total", **upstream_ok) == \
        value(before, "gateway_upstream_calls_total", **upstream_ok) + 1
    usage = reply["usage"]
    for direction, tokens in (("input", usage["prompt_tokens"]), ("output", usage["completion_tokens"])):
        assert tokens > 0
        assert value(after, "gateway_tokens_total", model="oa/echo-1", direction=direction) == \
            value(before, "gateway_tokens_total", model="oa/echo-1", direction=direction) + tokens


def test_a_model_that_cannot_be_reached_counts_as_a_fall_through_to_the_next(key):
    from tests.servers import free_port

    ModelFactory(server=ModelServerFactory(name="gone", kind="openai", base_url=f"http://127.0.0.1:{free_port()}/v1",
                                           connect_timeout=1.0), name="m1")
    before = samples()
    status, _, reply = chat(key, model="gone/m1")
    assert status == 200 and reply["model"] == "oa/echo-1", reply
    after = samples()
    failed = {"server": "gone", "model": "gone/m1"}
    assert value(after, "gateway_fall_throughs_total", reason="unreachable", **failed) == \
        value(before, "gateway_fall_throughs_total", reason="unreachable", **failed) + 1
    assert value(after, "gateway_upstream_calls_total", outcome="unreachable", **failed) == \
        value(before, "gateway_upstream_calls_total", outcome="unreachable", **failed) + 1


def test_a_refusal_by_a_request_ceiling_is_counted_by_its_counter(key, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1}
    before = samples()
    assert chat(key)[0] == 200
    assert chat(key)[0] == 429
    after = samples()
    assert value(after, "gateway_rate_limit_refusals_total", limit="shared") == \
        value(before, "gateway_rate_limit_refusals_total", limit="shared") + 1


def test_a_refusal_by_a_token_quota_is_counted_by_its_window(transactional_db, redis_url, upstream):  # noqa: F811
    key = api_key_for(AccountFactory(group=AccountGroupFactory(api_access=True, weekly_tokens=0)))
    ModelFactory(server=ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1"),
                 name="echo-1", is_default=True)
    before = samples()
    assert chat(key)[0] == 403
    after = samples()
    assert value(after, "gateway_quota_refusals_total", window="week") == \
        value(before, "gateway_quota_refusals_total", window="week") + 1


def test_a_value_written_by_another_process_is_in_the_scrape(db):
    """A process of its own (as a Celery worker or another web worker is) counts; once it is gone
    and marked dead, its live gauge goes, and its counters stay in the sums."""
    program = ("import django, sys; django.setup()\n"
               "from gateway.telemetry import metrics\n"
               "metrics.quota_refused('month'); metrics.process_started('worker')\n"
               "print('counted', flush=True); sys.stdin.readline()\n")
    env = child_env(DJANGO_SETTINGS_MODULE="gateway.settings")
    before = samples()
    child = subprocess.Popen([sys.executable, "-c", program], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "counted"
        alive = samples()
        assert value(alive, "gateway_quota_refusals_total", window="month") == \
            value(before, "gateway_quota_refusals_total", window="month") + 1
        assert value(alive, "gateway_processes", kind="worker") == value(before, "gateway_processes", kind="worker") + 1
    finally:
        child.communicate("\n", timeout=30)
    metrics_files.mark_dead(child.pid)
    gone = samples()
    assert value(gone, "gateway_processes", kind="worker") == value(before, "gateway_processes", kind="worker")
    assert value(gone, "gateway_quota_refusals_total", window="month") == \
        value(before, "gateway_quota_refusals_total", window="month") + 1


def test_prune_removes_the_files_of_dead_processes_only(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    for name in (f"counter_{dead_pid}.db", f"histogram_{dead_pid}.db", f"gauge_livesum_{dead_pid}.db",
                 f"counter_{os.getpid()}.db", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    assert metrics_files.prune(tmp_path) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"counter_{os.getpid()}.db", "notes.txt"]


def test_the_routes_are_patterns_and_a_webhook_token_is_never_a_label(key):
    token = "tok" + "z" * 45
    call("POST", f"/api/v1/hooks/{token}", body=b"{}", headers=[(b"content-type", b"application/json")])
    call("GET", f"/api/v1/secret-{token}/nothing-here")
    call("BREW", "/v1/models")
    status, _, body = scrape()
    assert status == 200
    text = body.decode()
    assert token not in text and "secret-" not in text and "BREW" not in text
    found = samples()
    assert value(found, "gateway_http_requests_total", route="api/v1/hooks/<str:token>", method="POST", status=404) >= 1
    assert value(found, "gateway_http_requests_total", route="unmatched", method="GET", status=404) >= 1
    assert any(name == "gateway_http_requests_total" and ("method", "other") in labels for name, labels in found)


def test_with_a_token_set_a_scrape_needs_it(db, settings):
    settings.METRICS_TOKEN = "scrape-secret-1234"
    status, headers, body = scrape()
    assert status == 401 and headers[b"www-authenticate"] == b'Bearer realm="metrics"'
    assert json.loads(body) == {"message": "A bearer token is required: Authorization: Bearer <METRICS_TOKEN>."}
    assert scrape(headers=[(b"authorization", b"Bearer wrong")])[0] == 401
    assert scrape(headers=[(b"authorization", b"Basic scrape-secret-1234")])[0] == 401
    status, _, body = scrape(client="203.0.113.9", headers=[(b"authorization", b"Bearer scrape-secret-1234")])
    assert status == 200 and b"gateway_http_requests_total" in body


def test_without_a_token_only_loopback_clients_may_scrape(db, settings):
    settings.METRICS_TOKEN = ""
    assert scrape(client="127.0.0.1")[0] == 200
    assert scrape(client="::1")[0] == 200
    status, _, body = scrape(client="203.0.113.9")
    assert status == 403
    assert json.loads(body) == {"message": "Metrics are served to loopback clients only; set METRICS_TOKEN to "
                                           "scrape from elsewhere."}
    # a client's own X-Forwarded-For is not believed; a trusted proxy's is
    assert scrape(client="203.0.113.9", headers=[(b"x-forwarded-for", b"127.0.0.1")])[0] == 403
    settings.TRUSTED_PROXIES = ["127.0.0.1"]
    assert scrape(client="127.0.0.1", headers=[(b"x-forwarded-for", b"198.51.100.4")])[0] == 403
    assert scrape(client="127.0.0.1", headers=[(b"x-forwarded-for", b"127.0.0.1")])[0] == 200


def test_a_scrape_is_not_rate_limited(db, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "general": 2}
    statuses = {scrape()[0] for _ in range(5)}
    assert statuses == {200}


def purge_the_task_queue() -> None:
    from gateway.celery import app

    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge(app.conf.task_default_queue)


def test_the_queue_depth_is_read_from_the_broker_when_scraped(db):
    """The broker the settings name: Redis with REDIS_URL, the embedded default's folder without."""
    from gateway.celery import app

    purge_the_task_queue()
    try:
        assert value(samples(), "gateway_queue_depth", queue="celery") == 0
        for _ in range(3):
            app.send_task("tests.nothing", args=())
        found = samples()
        assert value(found, "gateway_queue_depth", queue="celery") == 3
        assert value(found, "gateway_scrape_reading_up", reading="queue_depth") == 1
    finally:
        purge_the_task_queue()


def test_a_broker_that_does_not_answer_leaves_the_depth_out_and_the_scrape_answers(db, settings):
    from gateway.celery import app
    from tests.servers import free_port

    settings.METRICS_BROKER_TIMEOUT_SECONDS = 0.5
    before = app.conf.broker_read_url
    app.conf.broker_read_url = f"redis://127.0.0.1:{free_port()}/0"
    try:
        found = samples()
    finally:
        app.conf.broker_read_url = before
    assert not any(name == "gateway_queue_depth" for name, _ in found)
    assert value(found, "gateway_scrape_reading_up", reading="queue_depth") == 0


def test_the_spool_backlog_and_its_oldest_record_are_read_when_scraped(db):
    directory = usage_writer.spool().directory
    other = Spool(directory)  # another process's spool, as the drainer finds it
    an_hour_ago = "2020-01-01T00:00:00+00:00"
    try:
        for n in range(4):
            other.append({"k": f"backlog-{n}", "a": 1, "m": "oa/echo-1", "s": "chat", "i": 1, "o": 1, "r": "",
                          "t": an_hour_ago})
        found = samples()
        assert value(found, "gateway_usage_spool_backlog_records") >= 4
        assert value(found, "gateway_usage_spool_files") >= 1
        assert value(found, "gateway_usage_spool_oldest_record_age_seconds") > time.time() - 1577836800 - 60
    finally:
        path = other._path
        other.close()
        path.unlink()
