"""The account pages, as an account holder (no staff right) meets them in Chromium at 1366x768 against
a running gateway: the login refuses a wrong password with the API login's words and lets the right
one in; the usage page shows the day's tokens and spend against the group's quota and budget with its
chart; a key generated with the password is shown once and works; the calls, routines and inbox show
this account's rows and never the other account's; /admin/ sends the account to the console's login.
Every page fits the window (no sideways scroll) and logs no console error and no page error; a
screenshot of each page is kept (tests/browser/support.py) and was looked at.

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made, and every expectation worked out, before the browser starts."""

from decimal import Decimal

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from accounts.keys import KEY_PATTERN
from tests.browser.support import CHROMIUM, OVERFLOW, VIEWPORT, screenshot_path
from tests.factories import (
    PASSWORD,
    AccountFactory,
    AccountGroupFactory,
    ApiKeyFactory,
    CallRecordFactory,
    InboxMessageFactory,
    RoutineFactory,
    RunFactory,
    UsageRecordFactory,
    bearer,
)

pytestmark = pytest.mark.django_db(transaction=True)

COST_UNITS_PER_CURRENCY = 10**10



def rows_of_two_accounts():
    group = AccountGroupFactory(name="researchers", api_access=True, daily_tokens=2_000, monthly_tokens=50_000,
                                daily_budget=Decimal("4.00"))
    holder = AccountFactory(email="holder@example.test", full_name="Hana Holder", group=group)
    other = AccountFactory(email="someone-else@example.test", group=group)
    UsageRecordFactory(account=holder, input_tokens=1_200, output_tokens=300, cost_units=3 * COST_UNITS_PER_CURRENCY)
    UsageRecordFactory(account=other, input_tokens=9_999, output_tokens=1)
    ApiKeyFactory(account=holder)
    ApiKeyFactory(account=other)
    CallRecordFactory(account=holder, model="gpu-box/llama3.1:8b", model_requested="gpu-box/llama3.1:8b",
                      request_id="req-holder-ok", input_tokens=1_200, output_tokens=300,
                      cost_units=3 * COST_UNITS_PER_CURRENCY)
    refused = CallRecordFactory(account=holder, status=403, outcome="refused", model="", cost_units=0,
                                model_requested="cloud/gpt-4o", error_code="permission_denied",
                                request_id="req-holder-refused", input_tokens=0, output_tokens=0)
    CallRecordFactory(account=other, request_id="req-someone-else")
    routine = RoutineFactory(account=holder, name="Daily digest", trigger="webhook", model="gpu-box/llama3.1:8b",
                             delivery_targets=["inapp", "email:holder@example.test"],
                             prompt="Summarize the event for the team.\nKeep it short.")
    RunFactory(routine=routine, trigger="webhook", status="succeeded", output="Three commits.\nAll green.")
    RunFactory(routine=routine, trigger="schedule", status="failed",
               error="No model named and no default model is configured: choose the routine's model.")
    RoutineFactory(account=other, name="Someone else's routine")
    message = InboxMessageFactory(account=holder, routine=routine, title="Daily digest: Three commits",
                                  body="Three commits.\nAll green.")
    InboxMessageFactory(account=other, title="Someone else's message")
    return holder, routine, message, refused


def test_an_account_holder_walks_their_pages_and_never_reaches_the_console(live_gateway):
    holder, routine, message, refused = rows_of_two_accounts()
    base = live_gateway
    problems: list[str] = []
    overflow: dict[str, int] = {}

    def look(page, name: str) -> None:
        expect(page.locator("body")).to_be_visible()
        overflow[name] = page.evaluate(OVERFLOW)
        page.screenshot(path=screenshot_path(f"account-page-{name}"), full_page=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_context(viewport=VIEWPORT).new_page()
        page.on("console", lambda m: problems.append(f"{m.text} at {m.location.get('url')} on {page.url}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        try:
            page.goto(f"{base}/account/routines/")
            expect(page).to_have_url(f"{base}/account/login/?next=/account/routines/")
            for field in ("#id_email", "#id_password"):  # each box seen: as wide as the form, with a border
                box = page.locator(field)
                expect(box).to_be_visible()
                assert box.bounding_box()["width"] > 300
                assert box.evaluate("e => parseFloat(getComputedStyle(e).borderTopWidth)") > 0
            page.fill("#id_email", "holder@example.test")
            page.fill("#id_password", "not the password")
            page.click("#login-submit")
            expect(page.locator("#login-error")).to_have_text("These credentials do not match our records.")
            look(page, "login-refused")
            page.fill("#id_password", PASSWORD)
            page.click("#login-submit")
            expect(page).to_have_url(f"{base}/account/routines/")
            expect(page.locator(f'tr[data-routine="{routine.pk}"]')).to_contain_text("failed")
            expect(page.locator("#account-routines")).not_to_contain_text("Someone else")
            look(page, "routines")

            page.click("#nav-home")
            day = page.locator('#usage-windows tr[data-period="day"]')
            expect(day.locator(".tokens-used")).to_have_text("1,500")
            expect(day.locator(".quota")).to_contain_text("75% of 2,000")
            expect(day.locator(".spend")).to_have_text("3.00 / 4.00 (75%)")
            expect(page.locator("svg.home-chart rect.bar")).to_have_count(2)
            look(page, "usage")

            page.click("#nav-key")
            page.fill("#id_key_password", PASSWORD)
            page.click("#key-generate")
            key = page.locator("#new-key").inner_text()
            look(page, "key-shown")
            page.click("#key-done")
            expect(page.locator("#key-preview")).to_have_text(f"{key[:16]}…{key[-8:]}")
            assert key not in page.content()  # never shown again
            look(page, "key")

            page.click("#nav-calls")
            expect(page.locator("#account-calls tbody tr")).to_have_count(2)
            expect(page.locator("#account-calls")).not_to_contain_text("someone-else")
            look(page, "calls")
            page.click(f'tr[data-call="{refused.pk}"] a')
            expect(page.locator("#call-request-id")).to_have_text("req-holder-refused")
            look(page, "call")

            page.click("#nav-routines")
            page.click(f'tr[data-routine="{routine.pk}"] a')
            expect(page.locator("#routine-runs tbody tr")).to_have_count(2)
            look(page, "routine")

            page.click("#nav-inbox")
            expect(page.locator("#unread-count")).to_have_text("1")
            expect(page.locator("#account-inbox")).not_to_contain_text("Someone else")
            look(page, "inbox")
            page.click(f'tr[data-message="{message.pk}"] a')
            page.click("#mark-read")
            expect(page.locator("#unread-count")).to_have_count(0)
            page.click(f'tr[data-message="{message.pk}"] a')
            expect(page.locator("#message-read")).to_be_visible()
            look(page, "inbox-message")

            # what the account's own pages logged; the console's login page and the 404 asked for next are
            # not theirs (the 404 logs its own status, on purpose)
            walked = list(problems)
            page.goto(f"{base}/admin/")
            expect(page).to_have_url(f"{base}/admin/login/?next=/admin/")
            page.goto(f"{base}/account/inbox/{message.pk + 1}/")  # the other account's message
            expect(page.locator("#not-yours")).to_have_attribute("data-status", "404")
            look(page, "not-yours")

            page.goto(f"{base}/account/")
            page.click("#logout")
            expect(page).to_have_url(f"{base}/account/login/")
        finally:
            browser.close()

    assert walked == []
    assert overflow == dict.fromkeys(overflow, 0) and len(overflow) == 11
    assert KEY_PATTERN.match(key) and key.startswith(f"svc_usr_{holder.pk}_")
    assert httpx.get(f"{base}/api/v1/auth/verify", headers=bearer(key), timeout=30).status_code == 200
