"""The audit trail, as an operator sees it at 1366x768: a group's daily quota changed on its page leaves
an entry on the group's "Audit trail" (who, when, the field before and after) and in the audit log's list,
both in the console's theme and as wide as the window."""

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.browser.support import CHROMIUM, VIEWPORT, screenshot_path
from tests.factories import PASSWORD, AccountFactory, AccountGroupFactory

pytestmark = pytest.mark.django_db(transaction=True)



def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")



def test_a_quota_changed_in_the_console_shows_on_the_groups_audit_trail_and_in_the_log(live_gateway):
    operator = AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)
    group = AccountGroupFactory(name="research", daily_tokens=-1)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(f"{live_gateway}/admin/login/?next=/admin/accounts/accountgroup/{group.pk}/change/")
            page.fill("#id_username", operator.email)
            page.fill("#id_password", PASSWORD)
            page.click("#login-form [type=submit]")
            page.fill("#id_daily_tokens", "250000")
            page.click("[name=_save]")
            page.wait_for_url(f"{live_gateway}/admin/accounts/accountgroup/")

            page.goto(f"{live_gateway}/admin/accounts/accountgroup/{group.pk}/change/")
            page.get_by_role("link", name="Audit trail").click()
            page.wait_for_url(f"{live_gateway}/admin/accounts/accountgroup/{group.pk}/auditlog/")
            update = page.locator("tr.audit-entry", has_text="update")
            expect(update).to_have_count(1)
            expect(update.locator(".audit-who")).to_contain_text("operator@example.test")
            expect(update.locator("tr.audit-change")).to_have_count(1)
            expect(update.locator("tr.audit-change")).to_contain_text("Daily tokens")
            expect(update.locator("tr.audit-change")).to_contain_text("250000")
            assert no_sideways_scroll(page)
            page.screenshot(path=screenshot_path("audit-trail-group"))

            page.goto(f"{live_gateway}/admin/auditlog/logentry/")
            expect(page.locator("#result_list tbody tr", has_text="research")).to_have_count(2)  # created, changed
            assert no_sideways_scroll(page)
            page.screenshot(path=screenshot_path("audit-log-list"))
        finally:
            browser.close()
