"""What the fault tests check, read from the private cluster's database and the upstream's
request log once the stack has settled. Each check gathers every problem it finds and fails
once with all of them, so a failing run says everything that is wrong."""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone

from routines.runs import ANSWER_LOST
from tests.faults.load import Answer
from tests.faults.stack import Stack

# A queued run whose message was lost waits for the sweep's 60 s grace, a delivery lost with its
# task for its lease (about 75 s in this stack's settings).
SETTLE_SECONDS = 120.0
USAGE_SECONDS = 30.0  # spooled usage records reach the database
TERMINAL = ("succeeded", "failed")
EVENT_ID = re.compile(r'"id": "([a-z0-9]+-[0-9a-f]{6}-\d+)"')
CHAT_MARKER = re.compile(r"hello ([a-z0-9]+-[0-9a-f]{6}-\d+)")
# The seeded models' price (tests/faults/seed.py): 2.5 and 10 per million input and output tokens, in
# COST_UNITS (10^-10 of the currency) per token.
INPUT_UNITS, OUTPUT_UNITS = 25_000, 100_000


def summary(answers: list[Answer]) -> str:
    return ", ".join(f"{status}: {n}" for status, n in sorted(Counter(a.status for a in answers).items(),
                                                              key=lambda item: str(item[0])))


def fail_if(problems: list[str], title: str) -> None:
    if problems:
        shown = "\n  ".join(problems[:40])
        more = f"\n  … and {len(problems) - 40} more" if len(problems) > 40 else ""
        raise AssertionError(f"{title}: {len(problems)} problem(s)\n  {shown}{more}")


def check_answers(answers: list[Answer], *, outage: bool) -> None:
    """No 5xx but 503, every 503 with Retry-After; without an outage nothing but 200."""
    problems = []
    for a in answers:
        if a.status is None:
            continue  # no answer at all: the caller retries; nothing was promised
        if a.status == 503:
            if not outage:
                problems.append(f"{a.kind} {a.ident}: 503 without an outage: {a.body}")
            elif not a.retry_after:
                problems.append(f"{a.kind} {a.ident}: 503 without Retry-After: {a.body}")
        elif a.status != 200:
            problems.append(f"{a.kind} {a.ident}: {a.status}: {str(a.body)[:300]}")
    fail_if(problems, f"answers ({summary(answers)})")


# --- events and runs ---------------------------------------------------------------------------

def _runs(stack: Stack, account_id: int) -> list[tuple]:
    return stack.pg.query(
        "SELECT run.id, run.event_id, run.status, run.error FROM routines_run run "
        "JOIN routines_routine r ON r.id = run.routine_id WHERE r.account_id = %s", (account_id,))


def wait_runs_terminal(stack: Stack, account_id: int, event_ids: set[str], timeout: float = SETTLE_SECONDS) -> None:
    """Until every event in `event_ids` has a run and all its runs have ended, or the deadline
    (the checks after say what is still missing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        by_event = defaultdict(list)
        for _, event_id, status, _ in _runs(stack, account_id):
            by_event[event_id].append(status)
        if all(by_event.get(e) and all(s in TERMINAL for s in by_event[e]) for e in event_ids):
            return
        time.sleep(0.5)


def _usage_by_request(stack: Stack, account_id: int) -> Counter:
    rows = stack.pg.query("SELECT request_id, count(*) FROM gateway_usagerecord WHERE account_id = %s "
                          "GROUP BY request_id", (account_id,))
    return Counter({request_id: n for request_id, n in rows})


def wait_usage(stack: Stack, account_id: int, request_ids: set[str], timeout: float = USAGE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        have = _usage_by_request(stack, account_id)
        if all(have[r] for r in request_ids):
            return
        time.sleep(0.25)


def model_calls(stack: Stack) -> tuple[Counter, Counter]:
    """Chat completions the upstream received: (per event id of a run, per chat marker)."""
    per_event, per_chat = Counter(), Counter()
    for request in stack.upstream_requests():
        if request["path"] != "/v1/chat/completions" or not isinstance(request.get("json"), dict):
            continue
        text = " ".join(str(m.get("content", "")) for m in request["json"].get("messages", []) if isinstance(m, dict))
        for event_id in set(EVENT_ID.findall(text)):
            per_event[event_id] += 1
        for marker in set(CHAT_MARKER.findall(text)):
            per_chat[marker] += 1
    return per_event, per_chat


def check_events(stack: Stack, account: dict, answers: list[Answer], *, targets: int = 1,
                 twice_allowed: int = 0) -> dict:
    """Every event answered `200 queued` is stored once, has exactly one run, which succeeded,
    one usage record (request id `run-<id>`), one succeeded delivery per target, and one model
    call seen by the upstream. At most `twice_allowed` runs (those in flight at a kill) may instead
    have called the model twice (killed before its answer), or ended failed with ANSWER_LOST, one
    call, one usage record and no delivery (killed after its answer was metered, before it was
    saved: docs/decisions/0065-answer-arrived-not-saved.md)."""
    account_id = account["account_id"]
    accepted = {a.ident for a in answers if a.queued}
    assert accepted, f"no event was accepted ({summary([a for a in answers if a.kind == 'event'])})"
    wait_runs_terminal(stack, account_id, accepted)
    runs = _runs(stack, account_id)
    run_ids = {f"run-{run_id}" for run_id, _, status, error in runs if status == "succeeded" or error == ANSWER_LOST}
    wait_usage(stack, account_id, run_ids)

    problems = []
    stored = Counter(dict(stack.pg.query(
        "SELECT e.event_id, count(*) FROM routines_event e JOIN routines_routine r ON r.id = e.routine_id "
        "WHERE r.account_id = %s GROUP BY e.event_id", (account_id,))))
    by_event = defaultdict(list)
    for run_id, event_id, status, error in runs:
        by_event[event_id].append((run_id, status, error))
    usage = _usage_by_request(stack, account_id)
    deliveries = defaultdict(list)
    for run_id, status in stack.pg.query(
            "SELECT d.run_id, d.status FROM routines_delivery d JOIN routines_run run ON run.id = d.run_id "
            "JOIN routines_routine r ON r.id = run.routine_id WHERE r.account_id = %s", (account_id,)):
        deliveries[run_id].append(status)
    calls, _ = model_calls(stack)

    twice, answer_lost = [], []
    for event_id in sorted(accepted):
        if stored[event_id] != 1:
            problems.append(f"event {event_id}: stored {stored[event_id]} times")
        event_runs = by_event.get(event_id, [])
        if len(event_runs) != 1:
            problems.append(f"event {event_id}: {len(event_runs)} runs {event_runs}")
            continue
        run_id, status, error = event_runs[0]
        if status == "failed" and error == ANSWER_LOST and not deliveries.get(run_id) and calls[event_id] == 1:
            answer_lost.append(event_id)
            if usage[f"run-{run_id}"] != 1:
                problems.append(f"event {event_id}: run {run_id}, its answer lost, has {usage[f'run-{run_id}']} "
                                "usage records")
            continue
        if status != "succeeded":
            problems.append(f"event {event_id}: run {run_id} is {status} {error!r}")
        n = usage[f"run-{run_id}"]
        if n != 1:
            problems.append(f"event {event_id}: run {run_id} has {n} usage records")
        done = Counter(deliveries.get(run_id, []))
        if done["succeeded"] != targets or sum(done.values()) != targets:
            problems.append(f"event {event_id}: run {run_id} deliveries {dict(done)}, expected {targets} succeeded")
        if calls[event_id] == 2:
            twice.append(event_id)
        elif calls[event_id] != 1:
            problems.append(f"event {event_id}: run {run_id} called the model {calls[event_id]} times")
    if len(twice) + len(answer_lost) > twice_allowed:
        problems.append(f"{len(twice)} runs called the model twice and {len(answer_lost)} lost their answer (at most "
                        f"{twice_allowed} were in flight at the kill): {twice[:10]} {answer_lost[:10]}")
    problems += mispriced(stack, account_id)
    strays = set(stored) - accepted
    refused = {a.ident for a in answers if a.kind == "event" and not a.queued and a.status is not None}
    if strays & refused:
        problems.append(f"events refused but stored anyway: {sorted(strays & refused)[:10]}")
    fail_if(problems, f"{len(accepted)} accepted events ({summary([a for a in answers if a.kind == 'event'])})")
    return {"accepted": len(accepted), "twice": len(twice), "answer_lost": len(answer_lost)}


# --- chat calls -----------------------------------------------------------------------------------

def check_chats(stack: Stack, account: dict, answers: list[Answer]) -> dict:
    """Every chat call answered 200 has exactly one usage record, found by its X-Request-Id."""
    account_id = account["account_id"]
    answered = [a for a in answers if a.kind == "chat" and a.status == 200]
    assert answered, f"no chat call was answered ({summary(answers)})"
    problems = [f"chat {a.ident}: answered without X-Request-Id" for a in answered if not a.request_id]
    ids = {a.request_id for a in answered if a.request_id}
    wait_usage(stack, account_id, ids)
    usage = _usage_by_request(stack, account_id)
    missing = [a.request_id for a in answered if a.request_id and usage[a.request_id] == 0]
    doubled = [a.request_id for a in answered if usage[a.request_id] > 1]
    if missing:
        problems.append(f"{len(missing)} of {len(answered)} answered calls have no usage record, e.g. {missing[:5]}")
    if doubled:
        problems.append(f"{len(doubled)} answered calls have more than one usage record, e.g. {doubled[:5]}")
    problems += mispriced(stack, account_id)
    fail_if(problems, f"{len(answered)} answered chat calls ({summary(answers)})")
    return {"answered": len(answered)}


def mispriced(stack: Stack, account_id: int) -> list[str]:
    """Each of the account's usage records costs its tokens at the seeded price: with every record
    there once (the checks above), the spend is neither lost nor doubled."""
    rows = stack.pg.query(
        "SELECT request_id, input_tokens, output_tokens, cost_units FROM gateway_usagerecord WHERE account_id = %s "
        "AND cost_units <> input_tokens * %s + output_tokens * %s", (account_id, INPUT_UNITS, OUTPUT_UNITS))
    return [f"usage record {request}: {i} + {o} tokens cost {cost} units, not {i * INPUT_UNITS + o * OUTPUT_UNITS}"
            for request, i, o, cost in rows[:10]]


# --- quotas -----------------------------------------------------------------------------------------

def check_quota_counters(stack: Stack, account: dict) -> None:
    """`GET /api/v1/usage` (and the Redis counters behind it) equal the sums of the records: tokens
    against the token quotas, cost against the budgets."""
    import httpx

    from gateway.limits.quotas import windows_at
    from gateway.registry.prices import money_text

    account_id = account["account_id"]
    windows = {w.period: w for w in windows_at(datetime.now(timezone.utc))}

    def sums() -> dict[str, tuple[int, int]]:
        out = {}
        for period, window in windows.items():
            out[period] = tuple(stack.pg.query(
                "SELECT coalesce(sum(input_tokens + output_tokens), 0), coalesce(sum(cost_units), 0) "
                "FROM gateway_usagerecord WHERE account_id = %s AND created_at >= %s",
                (account_id, window.starts_at))[0])
        return out

    response = httpx.get(f"{stack.url}/api/v1/usage", headers={"Authorization": f"Bearer {account['key']}"},
                         timeout=10)
    assert response.status_code == 200, f"GET /api/v1/usage: {response.status_code} {response.text[:300]}"
    body = response.json()
    expected = sums()
    problems = []
    for period in windows:
        tokens, cost = expected[period]
        if body[period]["used"] != tokens:
            problems.append(f"{period}: /api/v1/usage says {body[period]['used']} tokens, the records sum to {tokens}")
        if body[period]["spend"] != money_text(cost):
            problems.append(f"{period}: /api/v1/usage says {body[period]['spend']} spent, the records sum to "
                            f"{money_text(cost)}")
    client = stack.redis.client()
    try:
        for period, window in windows.items():
            for kind, total in zip(("tokens", "spend"), expected[period]):
                raw = client.get(f"gw:{kind}:{account_id}:{period}:{int(window.starts_at.timestamp())}")
                if raw is not None and int(raw) != total:
                    problems.append(f"{period}: the Redis {kind} counter holds {int(raw)}, the records sum to {total}")
    finally:
        client.close()
    fail_if(problems, "quota and budget counters")
