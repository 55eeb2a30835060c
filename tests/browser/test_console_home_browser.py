"""The console, as an operator meets it in Chromium at 1366x768: the home's figures for the
last hour, day and 30 days are those of the usage records made here (read off the page), the model
server list and the account list fit the window (no sideways scroll, "Kind" on one line), and a
screenshot of the home and of the servers list is kept (tests/browser/support.py).

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made, and every expectation worked out, before the browser starts."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from gateway.limits.quotas import windows_at
from gateway.registry import server_health
from gateway.registry.prices import money_text
from tests.browser.support import CHROMIUM, VIEWPORT, screenshot_path
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

FITS = """() => ({page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
                 table: (() => { const t = document.querySelector('#result_list');
                                 return t ? t.scrollWidth - t.parentElement.clientWidth : 0; })()})"""
KIND_LINES = """() => [...document.querySelectorAll('td.field-kind_label')].map(td => {
    const range = document.createRange(); range.selectNodeContents(td);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size; })"""



def log_in(page, base: str) -> None:
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "operator@example.test")
    page.fill("#id_password", PASSWORD)
    page.click("#login-form [type=submit]")
    expect(page.locator("#console-home")).to_be_visible()


def test_the_home_shows_the_usage_records_and_the_lists_fit_at_1366_pixels(live_gateway):
    AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)
    group = AccountGroupFactory(name="researchers", daily_tokens=10_000, daily_budget=1)
    alice = AccountFactory(email="alice@example.test", group=group)
    bob = AccountFactory(email="bob@example.test", group=group)
    now = timezone.now()
    within_the_hour = [
        metered_call(account=alice, model="gpu-box/llama3.1:8b", input_tokens=1200, output_tokens=300,
                     cost_units=4_500_000_000, created_at=now - timedelta(minutes=5),
                     request_id="0f8e4c1d2b3a49c8a7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2"),
        metered_call(account=bob, model="cloud/gpt-4o-mini", input_tokens=700, output_tokens=100,
                     cost_units=1_250_000_001, created_at=now - timedelta(minutes=20)),
    ]
    earlier_today = metered_call(account=alice, model="gpu-box/llama3.1:8b", input_tokens=5000,
                                 output_tokens=2000, cost_units=0, created_at=now - timedelta(hours=3))
    days_ago = metered_call(account=bob, model="cloud/gpt-4o-mini", input_tokens=40_000, output_tokens=9_000,
                            cost_units=30_000_000_000, created_at=now - timedelta(days=3))
    # the token ceiling counts the UTC day (not the last 24 hours): run after midnight, "earlier today"
    # is yesterday's
    quota_day = windows_at(now)[0]
    alice_today = sum(r.input_tokens + r.output_tokens for r in (within_the_hour[0], earlier_today)
                      if r.created_at >= quota_day.starts_at)
    spans = {"hour": within_the_hour, "day": [*within_the_hour, earlier_today],
             "30d": [*within_the_hour, earlier_today, days_ago]}
    # the calls: these (each in the calls log too) and the calls log's four below, in every span
    expected = {span: {"calls": f"{len(rows) + 4:,}",
                       "tokens": f"{sum(r.input_tokens + r.output_tokens for r in rows):,}",
                       "input": f"{sum(r.input_tokens for r in rows):,}",
                       "spend": money_text(sum(r.cost_units for r in rows), 2)} for span, rows in spans.items()}
    # servers with long addresses and names, one failing, one never called: the list must still fit
    gpu = ModelServerFactory(name="gpu-box", base_url="http://gpu-box.internal.example:11434/v1")
    ModelFactory(server=gpu, name="llama3.1:8b")
    cloud = ModelServerFactory(name="cloud", kind="anthropic", base_url="https://api.anthropic.com", is_remote=True,
                               api_key="sk-test-not-shown")
    ModelServerFactory(name="wrong-address-server", base_url="http://127.0.0.1:9100")
    server_health.succeeded(SimpleNamespace(id=gpu.pk))
    server_health.failed(SimpleNamespace(id=cloud.pk), "529 Overloaded: the provider is over capacity right now, "
                                                       "retry later (request id req_0123456789abcdef)")
    server_health.flush()
    for n in range(12):
        AccountFactory(email=f"member-{n:02}-with-a-long-address@research-institute.example.test", group=group)
    # the calls log: three answered calls of the local model and a failed one, whose model was asked
    for latency in (100.0, 300.0, 200.0):
        CallRecordFactory(account=alice, model="gpu-box/llama3.1:8b", latency_ms=latency, ttft_ms=latency / 2,
                          created_at=now - timedelta(minutes=2))
    CallRecordFactory(account=bob, model="", model_requested="gpu-box/llama3.1:8b", outcome="failed", status=503,
                      latency_ms=30_000.0, ttft_ms=None, created_at=now - timedelta(minutes=3))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            log_in(page, live_gateway)
            expect(page).to_have_title("Home | Model gateway")
            assert "Django administration" not in page.content()
            for span in ("day", "hour", "30d"):
                page.click(f"#span-{span}")
                expect(page.locator(f"#span-{span}")).to_have_class("active")
                expect(page.locator("#home-calls")).to_have_text(expected[span]["calls"])
                expect(page.locator("#home-tokens")).to_have_text(expected[span]["tokens"])
                expect(page.locator("#home-input")).to_have_text(expected[span]["input"])
                expect(page.locator("#home-spend")).to_have_text(expected[span]["spend"])
                if span == "day":
                    page.screenshot(path=screenshot_path("console-home"), full_page=True)
            expect(page.locator('#home-models tr[data-model="cloud/gpt-4o-mini"] td').nth(1)).to_have_text("2")
            expect(page.locator('#home-accounts tr[data-account="bob@example.test"] td').last).to_have_text(
                money_text(within_the_hour[1].cost_units + days_ago.cost_units, 2))
            expect(page.locator('#home-servers tr[data-server="cloud"] .badge')).to_have_text("failing")
            expect(page.locator('#home-servers tr[data-server="gpu-box"] .badge')).to_have_text("healthy")
            expect(page.locator('#home-servers tr[data-server="wrong-address-server"] .badge')).to_have_text("idle")
            expect(page.locator('#home-quotas tr[data-account="alice@example.test"] td').last).to_have_text(
                f"{alice_today:,} / 10,000 ({alice_today * 100 // 10_000}%)")
            expect(page.locator('#home-calls-log tr[data-model="gpu-box/llama3.1:8b"] td')).to_have_text(
                ["gpu-box/llama3.1:8b", "6", "16.7%", "120 ms", "300 ms", "50 ms", "150 ms"])  # and two metered
            assert page.evaluate(FITS)["page"] == 0

            page.goto(f"{live_gateway}/admin/gateway/modelserver/")
            expect(page.locator("#result_list tbody tr")).to_have_count(3)
            page.screenshot(path=screenshot_path("console-model-servers"), full_page=True)
            assert page.evaluate(FITS) == {"page": 0, "table": 0}
            assert page.evaluate(KIND_LINES) == [1, 1, 1]

            page.goto(f"{live_gateway}/admin/accounts/account/")
            expect(page.locator("#result_list tbody tr")).to_have_count(15)
            page.screenshot(path=screenshot_path("console-accounts"))
            assert page.evaluate(FITS) == {"page": 0, "table": 0}
            for listing in ("accounts/accountgroup", "gateway/usagerecord"):  # ten columns; a request id's long word
                page.goto(f"{live_gateway}/admin/{listing}/")
                expect(page.locator("#result_list tbody tr").first).to_be_visible()
                assert page.evaluate(FITS) == {"page": 0, "table": 0}, listing
        finally:
            browser.close()


def test_a_browser_is_led_to_the_console_and_meets_its_404_in_the_theme_while_the_api_keeps_json(live_gateway):
    AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            for way_in in ("/", "/admin"):
                page.goto(f"{live_gateway}{way_in}")
                assert page.url == f"{live_gateway}/admin/login/?next=/admin/", way_in
            log_in(page, live_gateway)
            page.goto(f"{live_gateway}/")
            assert page.url == f"{live_gateway}/admin/"

            missing = page.goto(f"{live_gateway}/admin/no-such-page/")
            assert missing.status == 404 and missing.headers["content-type"] == "text/html; charset=utf-8"
            expect(page.locator("#error-page h1")).to_have_text("Model gateway 404 · Page not found")
            styled = page.evaluate("getComputedStyle(document.querySelector('#console-home-link')).backgroundColor")
            assert styled not in ("", "rgba(0, 0, 0, 0)", "transparent")  # the theme's colours are there
            page.screenshot(path=screenshot_path("console-404"))
            page.click("#console-home-link")
            expect(page.locator("#console-home")).to_be_visible()

            api = page.request.get(f"{live_gateway}/v1/nope", headers={"Accept": "application/json"})
            assert (api.status, api.headers["content-type"], api.json()) == (
                404, "application/json", {"message": "Not Found."})
            native = page.request.get(f"{live_gateway}/api/v1/nope", headers={"Accept": "text/html"})
            assert (native.status, native.json()) == (404, {"message": "Not Found."})
        finally:
            browser.close()
