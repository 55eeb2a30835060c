"""The calls log's test world: a running gateway (uvicorn on loopback, the test database) in front of
the reference upstream, an account with a key in group `team`, an OpenAI-kind server `oa` (its
`echo-1` the default model, priced) and an Anthropic-kind one `an`; and a wait for a call's row,
written by the server's drainer a moment after the call (every request here names its X-Request-Id)."""

from __future__ import annotations

import time
from decimal import Decimal
from types import SimpleNamespace

import anthropic
import httpx
import openai
import pytest

from gateway.models import CallRecord, UsageRecord
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.servers import wait_for_quiet_database
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

HELLO = [{"role": "user", "content": "one two three four five"}]
CHAT_PATH = "/v1/chat/completions"  # what the `oa` server is asked
MESSAGES_PATH = "/v1/messages"  # what the `an` server is asked


@pytest.fixture
def world(transactional_db, live_gateway, upstream):  # noqa: F811
    group = AccountGroupFactory(name="team", api_access=True)
    account = AccountFactory(group=group, email="dev@example.test")
    key = api_key_for(account)
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=2.0)
    an = ModelServerFactory(name="an", kind="anthropic", base_url=upstream.url, read_timeout=2.0)
    default = ModelFactory(server=oa, name="echo-1", is_default=True, input_price=Decimal("2"),
                           output_price=Decimal("8"))
    claude = ModelFactory(server=an, name="claude-echo")
    http = httpx.Client(base_url=live_gateway, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    yield SimpleNamespace(
        base=live_gateway, upstream=upstream, group=group, account=account, key=key, oa=oa, an=an,
        default=default, claude=claude, http=http,
        openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
        anthropic=anthropic.Anthropic(base_url=live_gateway, api_key=key, max_retries=0),
    )
    http.close()
    wait_for_quiet_database()


def rid(name: str) -> dict[str, str]:
    """The headers that give a request its id (a client's own, returned unchanged: spec 7.4)."""
    return {"X-Request-Id": name}


def call_of(request_id: str, timeout: float = 10.0) -> CallRecord:
    """The call's row once the server's drainer wrote it; exactly one for the request."""
    deadline = time.monotonic() + timeout
    while not (rows := list(CallRecord.objects.filter(request_id=request_id))):
        assert time.monotonic() < deadline, f"no call recorded for {request_id}"
        time.sleep(0.02)
    assert len(rows) == 1, rows
    return rows[0]


def usage_of(request_id: str, timeout: float = 10.0) -> UsageRecord:
    """The call's usage record once written: the drainer may write a call's row one cycle before its usage
    (a cycle can take the calls spool's line after the usage spool was read)."""
    deadline = time.monotonic() + timeout
    while (record := UsageRecord.objects.filter(request_id=request_id).first()) is None:
        assert time.monotonic() < deadline, f"no usage recorded for {request_id}"
        time.sleep(0.02)
    return record


def facts(call: CallRecord) -> dict:
    """The row's exact facts (the times are checked apart: they are measured)."""
    return {"account": call.account_id, "group": call.group_id, "surface": call.surface,
            "model_requested": call.model_requested, "model": call.model, "status": call.status,
            "outcome": call.outcome, "error_code": call.error_code, "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens, "cost_units": call.cost_units, "cached": call.cached,
            "fall_throughs": call.fall_throughs,
            "chain": [(a["model"], a["server"], a["outcome"], a["status"]) for a in call.attempts]}


def timed(call: CallRecord, *, first_token: bool = True) -> None:
    """Latency measured; the time to first token within it, each attempt's first byte within that."""
    assert call.latency_ms > 0
    for attempt in call.attempts:
        assert 0 < attempt["ttfb_ms"] <= call.latency_ms
    if not first_token:
        assert call.ttft_ms is None
        return
    assert 0 < call.ttft_ms <= call.latency_ms
    answered = [a for a in call.attempts if a["outcome"] == "ok"]
    assert all(a["ttfb_ms"] <= call.ttft_ms for a in answered[:1])
