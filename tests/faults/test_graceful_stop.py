"""A web process told to stop (SIGTERM to gunicorn's master, as Kubernetes and compose do at a rolling
update) finishes the streams it is serving within its grace period and loses no usage record: each
stream ends complete, or with its surface's failure signal, and each answered call has one record."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.faults import checks
from tests.faults.stack import Stack, wait_for
from tests.faults.test_faults import DEFAULT_MODEL, LIMITS, _account

STREAMS = 4
WORDS = 40  # at 20 tokens a second: each stream lasts about two seconds
GRACE_SECONDS = 30  # gunicorn's graceful_timeout, the default Kubernetes' terminationGracePeriodSeconds matches


def _stream(url: str, key: str, started: list[str]) -> dict:
    request_id = f"term-{uuid.uuid4().hex[:12]}"
    body = {"model": DEFAULT_MODEL, "stream": True, "messages": [{"role": "user", "content": "go on"}]}
    items: list[str] = []
    with httpx.Client(timeout=60) as client, client.stream(
            "POST", f"{url}/v1/chat/completions", json=body,
            headers={"Authorization": f"Bearer {key}", "X-Request-Id": request_id}) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                items.append(line[len("data: "):])
                if len(items) == 1:
                    started.append(request_id)
    return {"status": response.status_code, "request_id": response.headers.get("x-request-id"), "items": items}


def _text_and_failure(items: list[str]) -> tuple[str, bool]:
    text, failed = "", False
    for item in items[:-1]:
        chunk = json.loads(item)
        failed = failed or "error" in chunk
        for choice in chunk.get("choices", []):
            text += choice.get("delta", {}).get("content") or ""
    return text, failed


def test_sigterm_mid_stream_finishes_the_streams_and_loses_no_usage(live: Stack):
    account = _account(live, "term", **LIMITS)
    reply = " ".join(f"w{i}" for i in range(WORDS))
    live.upstream_control(latency_ms=0, tokens_per_second=20, reply=reply)
    started: list[str] = []
    try:
        with ThreadPoolExecutor(STREAMS) as pool:
            futures = [pool.submit(_stream, live.url, account["key"], started) for _ in range(STREAMS)]
            wait_for(lambda: len(started) == STREAMS, 30, "every stream's first chunk")
            stopped_at = time.monotonic()
            os.kill(live.web.proc.pid, signal.SIGTERM)  # the master alone, as a container's PID 1 gets it
            results = [future.result(timeout=GRACE_SECONDS + 30) for future in futures]
        live.web.proc.wait(timeout=GRACE_SECONDS + 10)
        took = time.monotonic() - stopped_at
    finally:
        live.upstream_control(tokens_per_second=0, reply=None)

    assert live.web.proc.returncode == 0, live.web.tail()
    assert took < GRACE_SECONDS, f"the web took {took:.1f}s to stop"
    for result in results:
        assert result["status"] == 200 and result["items"][-1] == "[DONE]", result
        text, failed = _text_and_failure(result["items"])
        assert text.strip() == reply or failed, f"a stream cut without its failure signal: {text!r}"
    finished = [r for r in results if _text_and_failure(r["items"])[0].strip() == reply]
    assert len(finished) == STREAMS, "a stream in flight at the stop did not finish within the grace period"
    ids = {r["request_id"] for r in results}
    checks.wait_usage(live, account["account_id"], ids)
    usage = checks._usage_by_request(live, account["account_id"])
    assert {request_id: usage[request_id] for request_id in ids} == dict.fromkeys(ids, 1)
