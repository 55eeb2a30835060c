"""LOG_FORMAT=json: one JSON object per line; a line per request with its
request id (the X-Request-Id answered), account, route, status, duration, model and tokens; a
line per fall-through; a line per routine run carrying the id of the request that queued it, in
the Celery worker's own log; no API key in any line."""

import io
import json
import logging

import httpx
import pytest

from gateway.telemetry.logfilters import RedactSecrets
from gateway.telemetry.logjson import JsonFormatter, RequestContext
from routines.models import Run
from tests.asgi import call
from tests.conftest import TEST_REDIS_URL
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.servers import free_port, wait_for_quiet_database, web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


@pytest.fixture
def json_log():
    """The root logger writing as settings.LOGGING does with LOG_FORMAT=json; yields a function
    returning the lines written so far, each parsed."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestContext())
    handler.addFilter(RedactSecrets())
    root, requests = logging.getLogger(), logging.getLogger("gateway.requests")
    level = requests.level
    root.addHandler(handler)
    requests.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        requests.setLevel(level)


@pytest.fixture
def key(transactional_db, redis_url, upstream, settings):  # noqa: F811
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000}
    key = api_key_for(AccountFactory(group=AccountGroupFactory(api_access=True)))
    ModelFactory(server=ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1"),
                 name="echo-1", is_default=True)
    return key


def chat(key: str, model: str, *, request_id: str | None = None):
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    if request_id:
        headers.append((b"x-request-id", request_id.encode()))
    status, answered, body = call("POST", "/v1/chat/completions", headers=headers, body=json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "log me"}]}).encode())
    return status, {name.decode().lower(): value.decode() for name, value in answered.items()}, json.loads(body)


def request_lines(lines, request_id):
    return [line for line in lines if line["logger"] == "gateway.requests" and line.get("request_id") == request_id]


def test_a_request_is_one_json_line_with_its_request_id_caller_route_status_model_and_tokens(key, json_log):
    from accounts.models import Account

    status, headers, reply = chat(key, "oa/echo-1")
    assert status == 200
    request_id = headers["x-request-id"]
    (line,) = request_lines(json_log(), request_id)
    assert line["level"] == "INFO" and line["message"] == "POST v1/chat/completions 200"
    assert line["account_id"] == Account.objects.get().pk
    assert (line["route"], line["method"], line["status"]) == ("v1/chat/completions", "POST", 200)
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0
    assert line["model"] == "oa/echo-1"
    assert (line["input_tokens"], line["output_tokens"]) == (reply["usage"]["prompt_tokens"],
                                                            reply["usage"]["completion_tokens"])
    assert line["time"].endswith("+00:00")


def test_a_client_request_id_is_the_lines_and_a_stream_has_its_tokens_too(key, json_log):
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json"),
               (b"x-request-id", b"client-trace-42")]
    status, answered, _ = call("POST", "/v1/chat/completions", headers=headers, body=json.dumps(
        {"model": "oa/echo-1", "stream": True, "messages": [{"role": "user", "content": "stream me"}]}).encode())
    assert status == 200 and dict(answered)[b"X-Request-Id"] == b"client-trace-42"
    (line,) = request_lines(json_log(), "client-trace-42")
    assert line["status"] == 200 and line["model"] == "oa/echo-1"
    assert line["input_tokens"] > 0 and line["output_tokens"] > 0


def test_a_fall_through_is_a_line_naming_the_model_that_failed_why_and_the_next(key, json_log):
    ModelFactory(server=ModelServerFactory(name="gone", kind="openai", base_url=f"http://127.0.0.1:{free_port()}/v1",
                                           connect_timeout=1.0), name="m1")
    status, headers, reply = chat(key, "gone/m1", request_id="fall-1")
    assert status == 200 and reply["model"] == "oa/echo-1"
    (line,) = [line for line in json_log() if line.get("event") == "fall_through"]
    assert line["request_id"] == "fall-1" and line["level"] == "WARNING"
    assert (line["server"], line["model"], line["reason"], line["next_model"]) == ("gone", "gone/m1", "unreachable",
                                                                                   "oa/echo-1")
    assert line["cause"]
    assert request_lines(json_log(), "fall-1")[0]["model"] == "oa/echo-1"


def test_no_line_holds_an_api_key(key, json_log):
    chat(key, "oa/echo-1", request_id=key)  # a client may send anything shaped as an id, its key too
    logging.getLogger("gateway.test").warning("a client sent %s", key, extra={"fields": {"sent": f"Bearer {key}"}})
    lines = json_log()
    assert lines and [line for line in lines if key in json.dumps(line)] == []
    (warned,) = [line for line in lines if line["logger"] == "gateway.test"]
    assert warned["sent"].startswith("Bearer ") and key not in warned["sent"]


def test_a_scrape_of_metrics_is_not_a_line_at_info(db, json_log):
    status, _, _ = call("GET", "/metrics")
    assert status == 200
    assert not [line for line in json_log() if line["logger"] == "gateway.requests"]


# --- the processes: a web process and a Celery worker, both with JSON logs ----------------------

@pytest.fixture(scope="module")
def process_env():
    from django.conf import settings

    url = settings.REDIS_URL or TEST_REDIS_URL
    return {"REDIS_URL": url, "CELERY_BROKER_URL": url, "REGISTRY_TTL_SECONDS": "0", "LOG_FORMAT": "json"}


@pytest.fixture(scope="module")
def json_gateway(django_db_setup, django_db_blocker, process_env):
    with django_db_blocker.unblock():
        with web_process(**process_env) as base:
            yield base


def parsed(path):
    lines = []
    for text in path.read_text(errors="replace").splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            lines.append({"unparsed": text})
    return lines


def test_a_run_is_a_worker_line_with_the_request_id_of_the_webhook_call_that_queued_it(
        transactional_db, redis_url, json_gateway, process_env, upstream):  # noqa: F811
    import redis
    from django.conf import settings

    from tests.routines.test_end_to_end import create_routine, send_event, wait_until, worker_process

    client = redis.Redis.from_url(process_env["REDIS_URL"])
    client.delete("celery", "unacked", "unacked_index")
    client.close()
    account = AccountFactory(group=AccountGroupFactory(api_access=True))
    ModelFactory(server=ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1"),
                 name="echo-1", is_default=True)
    key = api_key_for(account)
    http = httpx.Client(base_url=json_gateway, headers={"Authorization": f"Bearer {key}"}, timeout=10)
    try:
        created = create_routine(http, delivery_targets=["inapp"])
        with worker_process(process_env, name="json-worker"):
            answer = send_event(created["webhook_url"], created["webhook_secret"], {"text": "log it"}, "evt-json")
            request_id = answer.headers["X-Request-Id"]
            run = Run.objects.get(routine_id=created["routine"]["id"])
            wait_until(lambda: Run.objects.get(pk=run.pk).status in ("succeeded", "failed"), what="the run to end")
            worker_log = settings.VAR_DIR / "test-json-worker.log"
            ended = wait_until(lambda: [line for line in parsed(worker_log) if line.get("event") == "run_ended"],
                               what="the run's line")
    finally:
        http.close()
        wait_for_quiet_database()
    (line,) = ended
    assert line["request_id"] == request_id
    assert (line["run_id"], line["routine_id"], line["outcome"], line["trigger"]) == (
        run.pk, created["routine"]["id"], "succeeded", "webhook")
    assert line["duration_ms"] >= 0
    worker_lines = parsed(worker_log)
    # Celery's own lines are JSON too ("Task ... received"), after its start-up banner (printed)
    assert [line for line in worker_lines if line.get("logger", "").startswith("celery")]
    web_log = next(settings.VAR_DIR.glob(f"test-web-{json_gateway.rsplit(':', 1)[1]}.log"))
    web_lines = parsed(web_log)
    (hook,) = [line for line in web_lines
               if line.get("request_id") == request_id and line["logger"] == "gateway.requests"]
    assert (hook["route"], hook["status"]) == ("api/v1/hooks/<str:token>", 200)
    token = created["webhook_url"].rsplit("/", 1)[1]
    for text in (web_log.read_text(), worker_log.read_text()):
        assert key not in text and token not in text and created["webhook_secret"] not in text
