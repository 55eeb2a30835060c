"""The console's "Calls", as an operator meets it in Chromium at 1366x768: the list of calls fits the window
(no sideways scroll), filtering by outcome leaves the failed call, and its page shows the chain tried,
each attempt's outcome, and the prompt and reply its group kept. Screenshots of the list and of the call's
page are kept (tests/browser/support.py).

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made before the browser starts."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from tests.browser.support import CHROMIUM, VIEWPORT, screenshot_path
from tests.factories import PASSWORD, AccountFactory, AccountGroupFactory, CallCaptureFactory, CallRecordFactory

pytestmark = pytest.mark.django_db(transaction=True)

FITS = """() => ({page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
                 table: (() => { const t = document.querySelector('#result_list');
                                 return t ? t.scrollWidth - t.parentElement.clientWidth : 0; })()})"""
CHAIN = [
    {"model": "gpu-box/llama3.1:8b", "server": "gpu-box", "outcome": "unreachable", "status": 503,
     "ttfb_ms": 5003.2, "error": "connect timeout after 5.0 s (http://gpu-box.internal.example:11434/v1)"},
    {"model": "cloud/claude-3-5-haiku-20241022", "server": "cloud", "outcome": "unavailable", "status": 529,
     "ttfb_ms": 310.4, "error": "529 Overloaded"},
]



def test_the_calls_list_fits_and_a_failed_calls_page_shows_its_chain(live_gateway):
    AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)
    group = AccountGroupFactory(name="researchers", capture_calls=True)
    alice = AccountFactory(email="alice.longname@research-department.example.test", group=group)
    bob = AccountFactory(email="bob@example.test", group=AccountGroupFactory(name="ops"))
    now = timezone.now()
    for minutes in range(1, 12):
        CallRecordFactory(account=bob if minutes % 3 else alice, created_at=now - timedelta(minutes=minutes),
                          model="gpu-box/llama3.1:8b", model_requested="gpu-box/llama3.1:8b",
                          latency_ms=850.0 + minutes * 37, ttft_ms=120.0 + minutes, input_tokens=1200 * minutes,
                          output_tokens=340, cost_units=12_345_678 * minutes, cached=minutes == 4,
                          surface="chat.completions" if minutes % 2 else "native_chat")
    failed = CallRecordFactory(account=alice, created_at=now - timedelta(seconds=30), model="", status=503,
                               model_requested="gpu-box/llama3.1:8b", outcome="failed", ttft_ms=None,
                               error_code="service_unavailable", attempts=CHAIN, fall_throughs=1, input_tokens=0,
                               output_tokens=0, request_id="7f0c2a9e3b5d4c1a8e6f0b2d4a6c8e0f")
    CallCaptureFactory(call=failed, prompt='{"model": "gpu-box/llama3.1:8b", "messages": [{"role": "user", '
                                           '"content": "Summarise the [redacted] report"}]}', reply="")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(f"{live_gateway}/admin/login/?next=/admin/gateway/callrecord/")
            page.fill("#id_username", "operator@example.test")
            page.fill("#id_password", PASSWORD)
            page.click("#login-form [type=submit]")
            rows = page.locator("#result_list tbody tr")
            expect(rows).to_have_count(12)
            page.screenshot(path=screenshot_path("calls-list"), full_page=True)
            assert page.evaluate(FITS) == {"page": 0, "table": 0}
            expect(rows.first).to_contain_text("service_unavailable")
            expect(rows.first).to_contain_text("none answered")

            page.goto(f"{live_gateway}/admin/gateway/callrecord/?outcome__exact=failed")
            expect(rows).to_have_count(1)
            rows.first.locator("a").first.click()
            chain = page.locator("#call-chain tbody tr")
            expect(chain).to_have_count(2)
            expect(chain.nth(0)).to_contain_text("unreachableno connection, or a timeout")
            expect(chain.nth(1)).to_contain_text("529 Overloaded")
            expect(page.locator("pre.call-text").first).to_contain_text("Summarise the [redacted] report")
            expect(page.get_by_text("7f0c2a9e3b5d4c1a8e6f0b2d4a6c8e0f")).to_be_visible()
            page.screenshot(path=screenshot_path("call-detail"), full_page=True)
            assert page.evaluate(FITS)["page"] == 0
        finally:
            browser.close()
