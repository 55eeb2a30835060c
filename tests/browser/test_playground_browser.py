"""The playground, as an operator uses it in Chromium at 1366x768 against a running gateway in front of
the reference upstream: opened from the sidebar, a model picked, a system prompt and a message typed,
the reply read as it streams with its times, tokens and cost, then the conversation continued with the
reply as an assistant turn; an alias the operator's group may not use shows the API's refusal. The
calls are the operator's own, metered and in the calls log as playground calls. No other console
error, no sideways scroll. Screenshots before, during and after a reply are kept
(tests/browser/support.py) and were looked at.

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made before the browser starts, and read after it has closed."""

import re
from decimal import Decimal

import pytest
from playwright.sync_api import expect, sync_playwright

from gateway.models import CallRecord, UsageRecord
from gateway.registry.prices import money_text
from tests.browser.support import CHROMIUM, OVERFLOW, VIEWPORT, screenshot_path
from tests.factories import (
    PASSWORD,
    AccountFactory,
    AccountGroupFactory,
    AliasDeploymentFactory,
    AliasFactory,
    ModelFactory,
    ModelServerFactory,
)
from tests.faults.services import wait_for
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "The gateway answers through the playground, one token at a time, as any API call would."
SYSTEM = "You answer in one sentence."



def rows_of(model, count: int, timeout: float = 10.0, **filters) -> list:
    """The rows the gateway's drainer wrote, once there are `count` of them."""
    def written() -> list | None:
        rows = list(model.objects.filter(**filters).order_by("created_at"))
        return rows if len(rows) >= count else None

    return wait_for(written, timeout, f"{count} {model.__name__} rows", interval=0.02)


def test_an_operator_tries_a_model_in_the_playground_and_reads_the_streamed_reply(live_gateway, upstream):  # noqa: F811
    group = AccountGroupFactory(name="operators", all_models=False)  # echo-1 only: not the alias
    operator = AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True, group=group)
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=5.0)
    echo = ModelFactory(server=oa, name="echo-1", is_default=True, input_price=Decimal("2"),
                        output_price=Decimal("8"))
    AliasDeploymentFactory(alias=AliasFactory(name="fast"), model=ModelFactory(server=oa, name="echo-2"))
    group.allowed_models.set([echo])
    upstream.configure(reply=REPLY, tokens_per_second=20)  # about a second: the reply is seen arriving
    problems: list[tuple[str, str | None]] = []  # console errors and page errors, with their URL

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.on("console", lambda m: m.type == "error" and problems.append(
                (m.text, (m.location or {}).get("url"))))
            page.on("pageerror", lambda e: problems.append((f"pageerror: {e}", None)))
            page.goto(f"{live_gateway}/admin/login/?next=/admin/")
            page.fill("#id_username", "operator@example.test")
            page.fill("#id_password", PASSWORD)
            page.click("#login-form [type=submit]")
            page.wait_for_url(f"{live_gateway}/admin/")
            page.get_by_role("link", name="Playground").first.click()
            page.wait_for_url(f"{live_gateway}/admin/playground/")
            expect(page.locator("#playground-model option")).to_have_text(
                ["oa/echo-1", "oa/echo-2 (not allowed to your group)", "fast (not allowed to your group)"])
            expect(page.locator("#playground-model")).to_have_value("oa/echo-1")  # the default model first

            page.select_option("#playground-model", "fast")  # refused as the operator's API call would be
            page.fill("#playground-turns .pg-content", "How do you answer?")
            page.click("#playground-send")
            expect(page.locator("#playground-error")).to_have_text(
                "403 Forbidden: The model 'fast' is not allowed for your account group. (permission_denied)")
            expect(page.locator("#playground-status")).to_have_text("Refused.")
            page.screenshot(path=screenshot_path("playground-refused"))

            page.select_option("#playground-model", "oa/echo-1")
            page.fill("#playground-system", SYSTEM)
            page.fill("#playground-temperature", "0.3")
            page.fill("#playground-max-tokens", "100")
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("playground-before-reply"), full_page=True)

            page.click("#playground-send")
            expect(page.locator("#playground-status")).to_have_text("Streaming from oa/echo-1…")
            expect(page.locator("#playground-reply")).not_to_be_empty()
            page.screenshot(path=screenshot_path("playground-streaming"))
            expect(page.locator("#playground-reply")).to_have_text(REPLY)
            expect(page.locator("#playground-status")).to_have_text("Done.")
            expect(page.locator("#playground-error")).to_be_hidden()
            first = {name: page.locator(f"#playground-{name}").inner_text()
                     for name in ("answered", "ttft", "latency", "input-tokens", "output-tokens", "cost")}
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("playground-after-reply"), full_page=True)

            page.click("#playground-continue")  # the reply becomes an assistant turn, then a new user turn
            expect(page.locator("#playground-turns .pg-turn")).to_have_count(3)
            expect(page.locator("#playground-turns .pg-role").nth(1)).to_have_value("assistant")
            page.locator("#playground-turns .pg-content").nth(2).fill("Say it again.")
            page.click("#playground-send")
            expect(page.locator("#playground-status")).to_have_text("Done.")
            expect(page.locator("#playground-reply")).to_have_text(REPLY)
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("playground-second-turn"), full_page=True)
        finally:
            browser.close()

    # Chromium logs every 4xx answer to a fetch() as "Failed to load resource": the refusal asked for above,
    # and nothing else
    assert problems == [("Failed to load resource: the server responded with a status of 403 (Forbidden)",
                         f"{live_gateway}/admin/playground/reply")]
    assert first["answered"] == "oa/echo-1"
    assert re.fullmatch(r"\d+ ms", first["ttft"]) and re.fullmatch(r"\d+ ms", first["latency"])
    assert int(first["ttft"].split()[0]) <= int(first["latency"].split()[0])
    sent = [r.json for r in upstream.requests if r.path == "/v1/chat/completions"]
    assert [m["content"] for m in sent[0]["messages"]] == [SYSTEM, "How do you answer?"]
    assert (sent[0]["temperature"], sent[0]["max_tokens"]) == (0.3, 100)
    assert [(m["role"], m["content"]) for m in sent[1]["messages"]] == [
        ("system", SYSTEM), ("user", "How do you answer?"), ("assistant", REPLY), ("user", "Say it again.")]

    calls = rows_of(CallRecord, 3, account=operator)
    usage = rows_of(UsageRecord, 2, account=operator)
    assert [(c.surface, c.model_requested, c.status, c.outcome) for c in calls] == [
        ("playground", "fast", 403, "refused"), *[("playground", "oa/echo-1", 200, "ok")] * 2]
    assert [u.surface for u in usage] == ["playground", "playground"]
    assert (first["input-tokens"], first["output-tokens"], first["cost"]) == \
        (str(usage[0].input_tokens), str(usage[0].output_tokens), money_text(usage[0].cost_units))
    assert usage[0].cost_units > 0
