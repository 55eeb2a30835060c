"""The console's pages give the same numbers for the same window (gateway/console/call_counts.py): /v1 calls
answered, failed and refused, an agent's turn, the MCP chat tool and a routine run's model call, made through a
running gateway and the reference upstream, are counted alike by the home's "Calls" card, the Calls list it
links to and the usage console's totals; and so are the failed ones (failed or refused)."""

import html
import re
from datetime import timedelta

import openai
import pytest
from django.utils import timezone

from gateway.celery import app as celery_app
from gateway.models import CallRecord
from gateway.state.per_process import flush_all
from gateway.usage.call_log import call_log
from routines.ingest import ingest
from routines.models import Run
from tests.factories import AccountFactory, CallRecordFactory, RoutineFactory
from tests.faults.services import wait_for
from tests.gateway.calls_log.conftest import HELLO, call_of, rid
from tests.native.mcp_support import mcp_session, run

CALLS = 7  # two answered, one failed, one refused, the agent, the MCP chat tool, the routine run
FAILED = 2


@pytest.fixture
def eager():
    """The routine's run and its delivery run inline, in this process, once the event is committed (its calls log
    and usage spooled here, as in a worker)."""
    before = celery_app.conf.CELERY_TASK_ALWAYS_EAGER
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = True
    yield
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = before


def figure(page: str, element_id: str) -> str:
    return re.search(rf'id="{element_id}">([^<]*)<', page).group(1).strip()


def href(page: str, element_id: str) -> str:
    return html.unescape(re.search(rf'href="([^"]*)"[^>]*\bid="{element_id}"', page).group(1))


def listed(client, url: str) -> int:
    """How many calls the Calls list at `url` says it holds (its header's "N results")."""
    response = client.get(url)
    assert response.status_code == 200
    return int(re.search(r"(\d+) results?\b", response.content.decode()).group(1))


def test_the_home_the_calls_list_and_the_usage_console_count_the_same_calls(world, eager, client):
    # /v1: two answered, one that no model answered, one the gateway refused
    for n in range(2):
        world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=rid(f"ok-{n}"))
    world.upstream.configure(fail_status=503)
    with pytest.raises(openai.InternalServerError):
        world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=rid("failed"))
    world.upstream.configure(fail_status=None)
    with pytest.raises(openai.NotFoundError):
        world.openai.chat.completions.create(model="oa/no-such-model", messages=HELLO, extra_headers=rid("refused"))
    # the agent's turn, and the MCP server's chat tool
    assert world.http.post("/api/v1/agent/chat", json={"message": "one two", "tools": []},
                           headers=rid("agent")).status_code == 200

    async def chat():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"prompt": "three four"})

    assert run(chat()).is_error is False
    # a routine run's model call, in this process as in a worker
    routine = RoutineFactory(account=world.account, prompt="Summarize the event.", trigger="webhook",
                             delivery_targets=["inapp"], webhook_secret=None)
    status, answer = ingest(routine.webhook_token, b'{"text": "hello"}', {"X-Event-Id": "e1"})
    assert status == 200, answer
    done = Run.objects.get(routine=routine)  # its task ran inline once the event was committed
    assert done.status == "succeeded", done.error
    assert flush_all() and call_log.flush()

    assert [call_of(name).outcome for name in ("ok-0", "ok-1", "failed", "refused", "agent", f"run-{done.pk}")] == [
        "ok", "ok", "failed", "refused", "ok", "ok"]
    wait_for(lambda: CallRecord.objects.filter(surface="mcp").exists(), 10,  # the MCP request's id is the gateway's
             "the MCP chat tool's call recorded", interval=0.02)
    routine_call = call_of(f"run-{done.pk}")
    assert (routine_call.surface, routine_call.model, routine_call.tags) == (
        "routine", "oa/echo-1", {"routine": str(routine.pk), "run": str(done.pk)})
    assert routine_call.input_tokens > 0 and routine_call.account_id == world.account.pk
    assert CallRecord.objects.get(surface="mcp").tags == {"tool": "chat"}

    client.force_login(AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True))
    home = client.get("/admin/?range=30d").content.decode()  # the last 30 UTC days, as the usage console's default
    console = client.get("/admin/gateway/usagerecord/console/").content.decode()

    assert figure(home, "home-calls") == figure(console, "total-calls") == str(CALLS)
    assert listed(client, href(home, "home-calls")) == listed(client, href(console, "total-calls")) == CALLS
    assert figure(home, "home-failed") == f"{FAILED} failed" and figure(console, "total-failed") == str(FAILED)
    assert listed(client, href(home, "home-failed")) == listed(client, href(console, "total-failed")) == FAILED
    assert figure(home, "home-tokens") == figure(console, "total-tokens")  # the usage records' on both


def test_the_calls_list_offers_show_all_only_when_something_is_filtered(db, client):
    client.force_login(AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True))
    for outcome in ("ok", "ok", "refused"):
        CallRecordFactory(outcome=outcome, status=200 if outcome == "ok" else 403)

    unfiltered = client.get("/admin/gateway/callrecord/").content.decode()
    filtered = client.get("/admin/gateway/callrecord/?outcome__exact=refused").content.decode()

    assert "Show all" not in unfiltered
    assert re.search(r"1 result \(<a href=\"\?\">Show all</a>\)", filtered)


def test_over_a_range_longer_than_the_calls_log_keeps_the_usage_console_says_so(db, client, settings):
    settings.CALL_LOG_RETENTION_DAYS = 30
    client.force_login(AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True))
    today = timezone.now().date()
    kept = today - timedelta(days=29)  # the first whole day the log still holds

    longer = client.get("/admin/gateway/usagerecord/console/", {"from": str(today - timedelta(days=90)),
                                                                 "to": str(today)}).content.decode()
    default = client.get("/admin/gateway/usagerecord/console/").content.decode()  # the last 30 days

    assert re.search(rf'id="calls-kept-since">The calls log keeps each call 30 days .*: the calls before {kept} '
                     r"are no longer counted here, nor in the Calls list", longer)
    assert 'id="calls-kept-since"' not in default
