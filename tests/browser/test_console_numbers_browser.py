"""The home, the Calls list and the usage console in Chromium at 1366x768, as an operator reads them: no
JavaScript error on any of them (Playwright's `console` errors and `pageerror` events, collected over the
walk; the usage console's charts once raised one on every load), the same number of calls and of failed calls
on the three for the same window (the last 30 days), the usage console's filters in the theme's widgets, and a
local server without a key shown as needing none. Screenshots of the three pages are kept
(tests/browser/support.py) and were looked at.

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made, and every expectation worked out, before the browser starts."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from gateway.models import CallRecord
from tests.browser.support import CHROMIUM, OVERFLOW, VIEWPORT, screenshot_path
from tests.factories import (
    PASSWORD,
    AccountFactory,
    AccountGroupFactory,
    CallRecordFactory,
    ModelFactory,
    ModelServerFactory,
    metered_call,
)

pytestmark = pytest.mark.django_db(transaction=True)




@pytest.fixture
def calls():
    """A month of calls of two accounts: answered (with their usage), routine runs', failed and refused."""
    AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)
    group = AccountGroupFactory(name="researchers", daily_tokens=100_000)
    alice = AccountFactory(email="alice@example.test", group=group)
    bob = AccountFactory(email="bob@example.test", group=group)
    local = ModelServerFactory(name="local", base_url="http://127.0.0.1:11434/v1", api_key="", is_remote=False)
    ModelFactory(server=local, name="llama")
    now = timezone.now()
    for n in range(12):
        metered_call(account=(alice, bob)[n % 2], model=("local/llama", "cloud/gpt")[n % 3 == 0],
                     input_tokens=100 + n, output_tokens=40 + n, created_at=now - timedelta(days=n * 2, minutes=5))
    metered_call(account=alice, model="local/llama", surface="routine", created_at=now - timedelta(hours=3))
    for n, outcome in enumerate(("failed", "refused", "refused", "refused")):
        CallRecordFactory(account=bob, model="", model_requested="local/llama", outcome=outcome,
                          status=503 if outcome == "failed" else 403, input_tokens=0, output_tokens=0,
                          created_at=now - timedelta(hours=n + 1))
    # every call within the last 30 UTC days
    return {"calls": CallRecord.objects.count(), "failed": CallRecord.objects.filter(
        outcome__in=("failed", "refused")).count(), "alice": CallRecord.objects.filter(account=alice).count()}


def test_the_three_pages_agree_and_raise_no_javascript_error(live_gateway, calls):
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.on("console", lambda message: errors.append(f"console: {message.text} {message.location}")
                    if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(f"pageerror: {error} ({page.url})"))
            page.goto(f"{live_gateway}/admin/login/?next=/admin/")
            page.fill("#id_username", "operator@example.test")
            page.fill("#id_password", PASSWORD)
            page.click("#login-form [type=submit]")

            page.goto(f"{live_gateway}/admin/?range=30d")
            expect(page.locator("#home-calls")).to_have_text(str(calls["calls"]))
            expect(page.locator("#home-failed")).to_have_text(f"{calls['failed']} failed")
            expect(page.locator('#home-servers tr[data-server="local"]')).to_contain_text("idle")
            page.wait_for_load_state("networkidle")
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("console-home-30d"), full_page=True)

            page.click("#home-failed")
            expect(page.locator("#result_list tbody tr")).to_have_count(calls["failed"])
            page.go_back()
            page.click("#home-calls")
            expect(page.locator("#result_list tbody tr")).to_have_count(calls["calls"])
            expect(page.get_by_text(f"{calls['calls']} results")).to_be_visible()
            page.wait_for_load_state("networkidle")
            page.screenshot(path=screenshot_path("calls-list-30d"), full_page=True)

            page.goto(f"{live_gateway}/admin/gateway/usagerecord/console/")
            expect(page.locator("h1")).to_contain_text("Usage console")
            expect(page.locator("#total-calls")).to_have_text(str(calls["calls"]))
            expect(page.locator("#total-failed")).to_have_text(str(calls["failed"]))
            expect(page.locator("svg.usage-bars")).to_have_count(2)
            # the theme's select, with its chevron
            expect(page.locator("#id_group + span.material-symbols-outlined")).to_have_text("expand_more")
            assert "border-base-200" in page.locator("#id_from").get_attribute("class")
            page.wait_for_load_state("networkidle")
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("usage-console"), full_page=True)
            page.select_option("#id_group", label="researchers")
            page.fill("#id_account", "alice@example.test")
            page.click("#usage-filters input[type=submit]")  # the empty fields are no filter, never "required"
            expect(page).to_have_url(re.compile(r"account=alice%40example\.test"))
            expect(page.locator("#total-calls")).to_have_text(str(calls["alice"]))
            page.click("#total-calls")
            expect(page.locator("#result_list tbody tr")).to_have_count(calls["alice"])
            page.wait_for_load_state("networkidle")

            page.goto(f"{live_gateway}/admin/gateway/modelserver/")
            expect(page.locator("td.field-key_set")).to_have_text("not needed")
            page.wait_for_load_state("networkidle")
            page.screenshot(path=screenshot_path("model-server-list-key"), full_page=True)
        finally:
            browser.close()
    assert errors == []
