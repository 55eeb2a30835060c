"""A batch survives its worker and Redis: a batch of chat lines made through the API on the private stack,
its batch worker SIGKILLed (or Redis stopped) while lines are in flight, and then every line answered once in
the output file and metered once (one usage record per line's key), whatever was in flight at the fault."""

from __future__ import annotations

import json
import os
import time

import httpx

from tests.faults.stack import Stack, wait_for

DEFAULT_MODEL = "ref/echo-1"
LINES = 60


def _batch(stack: Stack, tag: str) -> tuple[dict, str]:
    account = stack.seed({"op": "account", "name": f"{tag}-{os.urandom(3).hex()}"})
    headers = {"Authorization": f"Bearer {account['key']}"}
    def line(i: int) -> str:
        body = {"model": DEFAULT_MODEL, "messages": [{"role": "user", "content": f"<{tag}:{i}>"}]}
        return json.dumps({"custom_id": f"{tag}-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body})

    content = "".join(line(i) + "\n" for i in range(LINES))
    uploaded = httpx.post(f"{stack.url}/v1/files", headers=headers, data={"purpose": "batch"},
                          files={"file": ("in.jsonl", content.encode())}, timeout=30)
    assert uploaded.status_code == 200, uploaded.text
    created = httpx.post(f"{stack.url}/v1/batches", headers=headers, timeout=30,
                         json={"input_file_id": uploaded.json()["id"], "endpoint": "/v1/chat/completions",
                               "completion_window": "24h"})
    assert created.status_code == 200, created.text
    return account, created.json()["id"]


def _lines_in(stack: Stack, batch_id: str, status: str) -> int:
    return stack.pg.query("SELECT count(*) FROM batches_batchline WHERE batch_id = %s AND status = %s",
                          (batch_id, status))[0][0]


def _settled(stack: Stack, account: dict, batch_id: str, tag: str) -> None:
    """Completed, every custom_id once in the output, and one usage record per line."""
    wait_for(lambda: stack.pg.query("SELECT status FROM batches_batch WHERE id = %s", (batch_id,))[0][0]
             == "completed", 120, f"batch {batch_id} completed")
    headers = {"Authorization": f"Bearer {account['key']}"}
    batch = httpx.get(f"{stack.url}/v1/batches/{batch_id}", headers=headers, timeout=30).json()
    assert batch["request_counts"] == {"total": LINES, "completed": LINES, "failed": 0}, batch
    output = httpx.get(f"{stack.url}/v1/files/{batch['output_file_id']}/content", headers=headers, timeout=30)
    answered = [json.loads(line) for line in output.text.splitlines()]
    assert sorted(a["custom_id"] for a in answered) == sorted(f"{tag}-{i}" for i in range(LINES))
    assert all(a["response"]["status_code"] == 200 for a in answered)

    def metered() -> bool:
        rows = stack.pg.query("SELECT count(*), count(DISTINCT key) FROM gateway_usagerecord WHERE account_id = %s",
                              (account["account_id"],))
        return rows[0] == (LINES, LINES)

    wait_for(metered, 30, "one usage record per line")
    keys = stack.pg.query("SELECT key FROM gateway_usagerecord WHERE account_id = %s", (account["account_id"],))
    assert all(key.startswith("batch-line-") for (key,) in keys)


def test_batch_worker_sigkilled_mid_batch(live: Stack):
    live.upstream_control(latency_ms=150)  # lines spend their time inside the model call
    account, batch_id = _batch(live, "bkill")
    wait_for(lambda: _lines_in(live, batch_id, "succeeded") >= 10 and _lines_in(live, batch_id, "running") > 0, 60,
             "lines answered and lines in flight")
    live.batch_worker.kill()
    started = time.monotonic()
    live.batch_worker.start(timeout=60)  # as a supervisor would; the sweep hands it the batch once its hold lapses
    _settled(live, account, batch_id, "bkill")
    assert time.monotonic() - started < 120
    asked = [json.dumps(r.get("json")) for r in live.upstream_requests()]
    times = [sum(f"<bkill:{i}>" in body for body in asked) for i in range(LINES)]
    assert min(times) == 1  # every line asked; only those in flight at the kill were asked again
    assert sum(times) - LINES <= 8 and max(times) <= 2, times


def test_redis_restarted_mid_batch(live: Stack):
    live.upstream_control(latency_ms=100)
    account, batch_id = _batch(live, "bredis")
    wait_for(lambda: _lines_in(live, batch_id, "succeeded") >= 10, 60, "lines answered")
    worker_pid = live.batch_worker.pid
    live.redis.stop_now()
    time.sleep(5.0)  # the fault itself: Redis is away this long
    live.redis.start(timeout=20)
    _settled(live, account, batch_id, "bredis")
    assert live.batch_worker.alive() and live.batch_worker.pid == worker_pid, live.batch_worker.tail()
