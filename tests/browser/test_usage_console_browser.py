"""The usage console, as an operator sees it: headless Chromium (Debian's `chromium`, driven by
Playwright) logs in to the admin of a running gateway, opens the usage console from the admin
index, filters by an account, sees the charts drawn, the totals of the records made here (tokens
and spend) and the account's day against its budget, and exports them as CSV with their cost.
Screenshots go to tests/browser/support.py's folder (SCREENSHOT_DIR).

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made, and every expectation worked out, before the browser starts."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from gateway.web.output import timestamp
from tests.browser.support import CHROMIUM, screenshot_path
from tests.factories import PASSWORD, AccountFactory, AccountGroupFactory, metered_call

pytestmark = pytest.mark.django_db(transaction=True)




def test_an_operator_filters_the_usage_console_by_account_and_exports_csv(live_gateway):
    AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)
    group = AccountGroupFactory(name="researchers", daily_tokens=100_000, weekly_tokens=-1, monthly_tokens=-1,
                                daily_budget=1)
    alice = AccountFactory(email="alice@example.test", group=group)
    bob = AccountFactory(email="bob@example.test", group=group)
    now = timezone.now()
    made = [  # alice: three days, two models; bob: other usage that the filter must leave out
        metered_call(account=alice, model="local/llama", input_tokens=1200, output_tokens=300,
                           created_at=now - timedelta(days=2)),
        metered_call(account=alice, model="cloud/gpt", input_tokens=800, output_tokens=400,
                           created_at=now - timedelta(days=2, minutes=5)),
        metered_call(account=alice, model="local/llama", input_tokens=50, output_tokens=25,
                           created_at=now - timedelta(days=1)),
        metered_call(account=alice, model="cloud/gpt", input_tokens=7, output_tokens=3, created_at=now,
                           cost_units=2_500_000_001),  # 0.2500000001 of the currency
    ]
    metered_call(account=bob, model="local/llama", input_tokens=99_000, output_tokens=1, created_at=now)
    tokens = sum(r.input_tokens + r.output_tokens for r in made)
    days = {r.created_at.date() for r in made}
    segments = len({(r.created_at.date(), r.model) for r in made})
    expected_csv = sorted((timestamp(r.created_at), r.model, str(r.input_tokens), str(r.output_tokens)) for r in made)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1400}, accept_downloads=True)
            page.goto(f"{live_gateway}/admin/login/?next=/admin/")
            page.fill("#id_username", "operator@example.test")
            page.fill("#id_password", PASSWORD)
            page.click("#login-form [type=submit]")
            link = page.locator("#usage-console-link a")
            expect(link).to_have_text("Usage console")
            page.screenshot(path=screenshot_path("admin-index"))
            link.click()
            expect(page.locator("h1")).to_have_text("Usage console")

            page.fill("#id_account", "alice@example.test")
            page.click("#usage-filters input[type=submit]")
            expect(page.locator("#usage-filters #id_account")).to_have_value("alice@example.test")
            expect(page.locator("#total-tokens")).to_have_text(f"{tokens:,}")
            expect(page.locator("#total-calls")).to_have_text(str(len(made)))
            charts = page.locator("svg.usage-bars")
            expect(charts).to_have_count(2)
            for i in range(2):
                expect(charts.nth(i).locator("g.bar")).to_have_count(len(days))
                expect(charts.nth(i).locator("rect.segment")).to_have_count(segments)
            expect(page.locator("#usage-legend li.series")).to_have_count(2)
            box = charts.first.bounding_box()
            # drawn, not collapsed (the two charts side by side, each half the page)
            assert box is not None and box["width"] > 300 and box["height"] > 100
            expect(page.locator("#top-accounts tbody tr")).to_have_count(1)
            expect(page.locator('#ceilings td[data-period="day"]')).to_contain_text("/ 100,000")
            expect(page.locator("#total-spend")).to_have_text("0.2500000001")
            expect(page.locator('#budgets td[data-period="day"]')).to_have_text("0.2500000001 / 1.00 (25%)")
            page.screenshot(path=screenshot_path("usage-console-alice"), full_page=True)

            with page.expect_download() as download:
                page.click("#usage-csv")
            saved = screenshot_path("usage-alice.csv")
            download.value.save_as(saved)
        finally:
            browser.close()

    rows = list(csv.DictReader(io.StringIO(saved.read_text())))
    assert {r["account"] for r in rows} == {"alice@example.test"}
    assert sorted((r["created_at"], r["model"], r["input_tokens"], r["output_tokens"]) for r in rows) == expected_csv
    assert sorted(r["cost"] for r in rows) == ["0.000000", "0.000000", "0.000000", "0.2500000001"]
