"""What survives a fault, shown: a private stack under a bounded load of signed webhook events
and chat completions, one fault injected mid-load, then the private database checked once the
stack has settled (tests/faults/checks.py). Run alone with `bin/test tests/faults`."""

from __future__ import annotations

import os
import socket
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.faults import checks
from tests.faults.load import Load, chat_maker, event_maker
from tests.faults.stack import Stack, wait_for

DEFAULT_MODEL = "ref/echo-1"
DOWN_SECONDS = 5.0
# The Procfile's worker runs Celery's default concurrency: one pool process per CPU.
WORKER_CONCURRENCY = os.cpu_count() or 1
QUOTA = 10**9  # a ceiling, so that quota windows are counted and checked, never reached
BUDGET = 10**6  # a budget in money, the same way
LIMITS = {f"{period}_{kind}": limit for period in ("daily", "weekly", "monthly")
          for kind, limit in (("tokens", QUOTA), ("budget", BUDGET))}


def _account(stack: Stack, name: str, **spec) -> dict:
    return stack.seed({"op": "account", "name": f"{name}-{os.urandom(3).hex()}", **spec})


def _probe_events_consumed(stack: Stack, account: dict, count: int = 5, timeout: float = 30) -> None:
    """New events after the fault are taken up by a worker: their runs succeed within `timeout`."""
    load = Load(stack.url, event_maker(account["routines"], "probe"), count, concurrency=2).start()
    answers = load.join(30)
    accepted = {a.ident for a in answers if a.queued}
    assert len(accepted) == count, f"probe events not accepted: {checks.summary(answers)} {answers[0].body}"
    ids = tuple(accepted)

    def done():
        rows = stack.pg.query("SELECT count(*) FROM routines_run WHERE event_id = ANY(%s) AND status = 'succeeded'",
                              (list(ids),))
        return rows[0][0] == count

    wait_for(done, timeout, f"the runs of {count} events posted after the fault (is the worker consuming?)")


def test_worker_sigkill_mid_load(live: Stack):
    """Rule 4: SIGKILL of the Celery worker (and its pool) while runs are inside their model
    call; a new worker is started as a supervisor would. Every accepted event ends as one
    succeeded run, with one usage record, one delivery, and one model call (two at most for
    the runs that were in flight at the kill)."""
    live.upstream_control(latency_ms=200)  # runs spend most of their time inside the model call
    account = _account(live, "wkill", routines=3, **LIMITS)
    load = Load(live.url, event_maker(account["routines"], "wkill"), 150, rate=15, concurrency=4).start()
    load.wait_answered(50)
    wait_for(lambda: live.pg.query("SELECT count(*) FROM routines_run WHERE status = 'running'")[0][0] > 0, 10,
             "a run in flight")
    live.worker.kill()
    live.worker.start(timeout=60)
    answers = load.join()
    checks.check_answers(answers, outage=False)
    checks.check_events(live, account, answers, twice_allowed=WORKER_CONCURRENCY)
    checks.check_quota_counters(live, account)


def test_web_worker_sigkill_mid_load(live: Stack):
    """Rule 1: SIGKILL of one gunicorn worker under chat calls; gunicorn starts another. Every
    call answered 200 has exactly one usage record (by its X-Request-Id)."""
    account = _account(live, "webkill", **LIMITS)
    load = Load(live.url, chat_maker(account["key"], DEFAULT_MODEL, "webkill"), 300, rate=30, concurrency=6).start()
    load.wait_answered(100)
    victim = live.web_workers()[0]
    os.kill(victim, 9)
    answers = load.join()
    wait_for(lambda: len(live.web_workers()) == 2 and victim not in live.web_workers(), 30,
             "gunicorn replacing the killed worker")
    checks.check_answers([a for a in answers if a.status is not None], outage=False)
    checks.check_chats(live, account, answers)
    checks.check_quota_counters(live, account)


def test_redis_restart_mid_load(live: Stack):
    """Rules 1, 2, 3, 5, 6: Redis stopped for 5 s (no persistence) and started again under events
    and chat calls. The same worker process goes on consuming; calls during the outage get 503,
    never 500; no answered call lacks its usage record; every accepted event ends as one run; the
    quota counters, rebuilt after the restart, equal the sums of the usage records."""
    account = _account(live, "redis", routines=2, **LIMITS)
    worker_pid = live.worker.pid
    events = Load(live.url, event_maker(account["routines"], "redis"), 150, rate=12, concurrency=4).start()
    chats = Load(live.url, chat_maker(account["key"], DEFAULT_MODEL, "redis"), 240, rate=20, concurrency=6).start()
    chats.wait_answered(50)
    live.redis.stop_now()
    time.sleep(DOWN_SECONDS)  # the fault itself: Redis is away this long
    live.redis.start(timeout=20)
    answers = events.join() + chats.join()

    assert live.worker.alive() and live.worker.pid == worker_pid, f"the worker exited:\n{live.worker.tail()}"
    _probe_events_consumed(live, account)
    assert live.worker.alive() and live.worker.pid == worker_pid, "the worker was replaced"
    checks.check_answers(answers, outage=True)
    checks.check_chats(live, account, answers)
    checks.check_events(live, account, answers)
    checks.check_quota_counters(live, account)


def test_five_redis_restarts_in_a_row(live: Stack):
    """Rule 5: five Redis restarts in a row (5 s down each), each one while the worker is
    consuming, with runs in flight and messages unacknowledged; the same worker process goes
    on consuming after every one."""
    live.upstream_control(latency_ms=300)  # runs in flight and messages prefetched at every stop
    account = _account(live, "flap", routines=2)
    worker_pid = live.worker.pid
    load = Load(live.url, event_maker(account["routines"], "flap"), 500, rate=8, concurrency=3,
                deadline_seconds=120).start()

    def runs_started_since(moment: float) -> int:
        return live.pg.query("SELECT count(*) FROM routines_run WHERE started_at > to_timestamp(%s)", (moment,))[0][0]

    since = time.time()
    for restart in range(1, 6):
        # the worker is back and busy: it took up runs since the last restart
        wait_for(lambda: runs_started_since(since) >= 2, 40, f"the worker consuming before restart {restart}")
        live.redis.stop_now()
        time.sleep(DOWN_SECONDS)
        live.redis.start(timeout=20)
        since = time.time()
        assert live.worker.alive(), f"the worker exited at Redis restart {restart}:\n{live.worker.tail(80)}"
    wait_for(lambda: runs_started_since(since) >= 2, 40, "the worker consuming after the fifth restart")
    load.stop()
    answers = load.join()
    assert live.worker.alive() and live.worker.pid == worker_pid, f"the worker exited:\n{live.worker.tail(80)}"
    live.upstream_control(latency_ms=60)
    _probe_events_consumed(live, account, timeout=60)
    assert live.worker.alive() and live.worker.pid == worker_pid, "the worker was replaced"
    checks.check_answers(answers, outage=True)


def test_postgres_restart_mid_load(live: Stack):
    """Rules 1, 4, 6: PostgreSQL stopped (`pg_ctl stop -m fast`) for 5 s and started again under
    events and chat calls. No 500 (503 during the outage); every answered call has one usage
    record; every accepted event one run, billed once; `GET /api/v1/usage` answers afterwards."""
    account = _account(live, "pg", routines=2, **LIMITS)
    events = Load(live.url, event_maker(account["routines"], "pg"), 150, rate=12, concurrency=4).start()
    chats = Load(live.url, chat_maker(account["key"], DEFAULT_MODEL, "pg"), 240, rate=20, concurrency=6).start()
    chats.wait_answered(50)
    live.pg.stop("fast")
    time.sleep(DOWN_SECONDS)
    live.pg.start()
    for _ in range(5):  # no request fails once PostgreSQL is back: connections are checked before use
        response = httpx.get(f"{live.url}/api/v1/usage", headers={"Authorization": f"Bearer {account['key']}"},
                             timeout=10)
        assert response.status_code == 200, f"GET /api/v1/usage after the restart: {response.status_code} " \
                                            f"{response.text[:300]}"
    answers = events.join() + chats.join()
    checks.check_answers(answers, outage=True)
    checks.check_chats(live, account, answers)
    checks.check_events(live, account, answers)
    checks.check_quota_counters(live, account)


@pytest.fixture
def silent_server():
    """A port that accepts connections and never answers (a hung model server)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(512)
        yield sock.getsockname()[1]


def test_dead_model_server_is_skipped(live: Stack, silent_server: int):
    """Rule 7: a chain whose first model's server accepts but never answers falls through to
    the default model; after the first failure every web process skips that server at once."""
    timeout = 1.0
    live.seed({"op": "server", "name": f"hung{silent_server}", "base_url": f"http://127.0.0.1:{silent_server}/v1",
               "connect_timeout": timeout, "read_timeout": timeout, "models": ["m1"]})
    account = _account(live, "dead")
    model = f"hung{silent_server}/m1"

    def call() -> tuple[float, httpx.Response]:
        started = time.monotonic()
        with httpx.Client(timeout=30) as client:  # a connection of its own: any web process may take it
            response = client.post(f"{live.url}/v1/chat/completions",
                                   headers={"Authorization": f"Bearer {account['key']}"},
                                   json={"model": model, "messages": [{"role": "user", "content": "hello"}]})
        return time.monotonic() - started, response

    first, response = call()
    assert response.status_code == 200, response.text[:300]
    assert response.json()["model"] == DEFAULT_MODEL
    timings = []
    for _ in range(30):
        elapsed, response = call()
        assert response.status_code == 200 and response.json()["model"] == DEFAULT_MODEL, response.text[:300]
        timings.append(elapsed)
    slow = [round(t, 2) for t in timings if t >= timeout * 0.8]
    p50 = statistics.median(timings)
    assert p50 < timeout / 4, f"calls after the first failure still wait for the hung server: p50 {p50:.2f}s " \
                              f"(first call {first:.2f}s, slow ones {slow})"
    assert len(slow) <= 1, f"{len(slow)} of 30 calls waited for the hung server after the first failure " \
                           f"(first call {first:.2f}s): {slow}; the cooldown must be shared by every process"


def test_registry_change_seen_at_once(live: Stack):
    """Rule 8: a model allowed to a group by `applyconfig` (another process) is usable in every
    web process on the next request, and refused again on the next request once taken away,
    though REGISTRY_TTL_SECONDS and CREDENTIAL_CACHE_SECONDS are 30 s in this stack."""
    account = _account(live, "reg", all_models=False, allowed_models=[])
    group = account["group"]

    def statuses(n: int = 12) -> list[int]:
        out = []
        for _ in range(n):
            with httpx.Client(timeout=30) as client:  # fresh connections reach both web processes
                out.append(client.post(f"{live.url}/v1/chat/completions",
                                       headers={"Authorization": f"Bearer {account['key']}"},
                                       json={"model": DEFAULT_MODEL,
                                             "messages": [{"role": "user", "content": "hi"}]}).status_code)
        return out

    assert set(statuses()) == {403}, "the group may not use the model yet"

    def apply(allowed: list[str]) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(f"groups:\n  - name: {group}\n    api_access: true\n    allowed_models: {allowed}\n")
        try:
            live.manage("applyconfig", f.name)
        finally:
            os.unlink(f.name)

    apply([DEFAULT_MODEL])
    after_allow = statuses()
    assert set(after_allow) == {200}, f"after allowing {DEFAULT_MODEL}: {after_allow}"
    apply([])
    after_remove = statuses()
    assert set(after_remove) == {403}, f"after taking {DEFAULT_MODEL} away: {after_remove}"


DRILL_KEYS = 60


def test_idempotent_retries_after_the_client_is_killed_mid_answer(live: Stack):
    """Every call of a load carries its own `Idempotency-Key`; its client goes away while the
    model is still answering (a read timeout shorter than the reply), then retries the same call with
    the same key until it has an answer (a 409 while the first is still being answered, waiting its
    Retry-After). Each key is answered 200, called the model once and is metered once, at its price."""
    account = _account(live, "idem", **LIMITS)
    live.upstream_control(tokens_per_second=20)  # "Echo: hello <marker>" takes about 150 ms to stream
    run_tag = os.urandom(3).hex()
    outcomes: dict[str, tuple[int, str, str]] = {}

    def drill(i: int) -> None:
        marker = f"idem-{run_tag}-{i}"
        body = {"model": DEFAULT_MODEL, "messages": [{"role": "user", "content": f"hello {marker}"}]}
        headers = {"Authorization": f"Bearer {account['key']}", "Idempotency-Key": f"drill-{marker}"}
        with httpx.Client(base_url=live.url, timeout=0.08) as impatient:
            try:
                impatient.post("/v1/chat/completions", json=body, headers=headers)
            except httpx.TimeoutException:
                pass  # the client is gone mid-answer
        with httpx.Client(base_url=live.url, timeout=30) as client:
            for _ in range(40):  # bounded: a claim is released within IDEMPOTENCY_HOLD_SECONDS at worst
                response = client.post("/v1/chat/completions", json=body, headers=headers)
                if response.status_code != 409:
                    break
                time.sleep(float(response.headers.get("Retry-After", "1")))
            outcomes[marker] = (response.status_code, response.headers.get("X-Request-Id", ""),
                                response.headers.get("Idempotent-Replayed", ""))

    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(drill, range(DRILL_KEYS)))
    finally:
        live.upstream_control(tokens_per_second=0)
    assert len(outcomes) == DRILL_KEYS
    statuses = [status for status, _, _ in outcomes.values()]
    assert statuses == [200] * DRILL_KEYS, f"answers: {sorted(set(statuses))}"
    replayed = sum(1 for _, _, flag in outcomes.values() if flag == "true")
    assert replayed >= DRILL_KEYS // 2, f"only {replayed} retries were replays: the clients were not cut mid-answer"
    request_ids = {request_id for _, request_id, _ in outcomes.values()}
    checks.wait_usage(live, account["account_id"], request_ids)
    per_request = dict(live.pg.query("SELECT request_id, count(*) FROM gateway_usagerecord WHERE account_id = %s "
                                     "GROUP BY request_id", (account["account_id"],)))
    assert per_request == {request_id: 1 for request_id in request_ids}, "each key metered once"
    _, per_chat = checks.model_calls(live)
    calls = {marker: per_chat[marker] for marker in outcomes}
    assert set(calls.values()) == {1}, f"model calls per key: {sorted(calls.items(), key=lambda kv: -kv[1])[:5]}"
    assert checks.mispriced(live, account["account_id"]) == []
    checks.check_quota_counters(live, account)
