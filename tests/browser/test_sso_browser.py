"""Single sign-on, as an operator sees it at 1366x768: the console's login page offers "Sign in with
<provider>" beside the password form; the button goes to the OpenID Connect provider started on loopback
(tests/accounts/oidc_provider.py), whose sign-in form sends the browser back to the console, signed in.
An identity with no staff account comes back to the login page with the reason."""

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.accounts.test_sso import PROVIDER_NAME, gateway_with_sso
from tests.browser.support import CHROMIUM, VIEWPORT, screenshot_path
from tests.factories import AccountFactory, AccountGroupFactory

pytestmark = pytest.mark.django_db(transaction=True)




def test_an_operator_signs_in_with_the_provider_and_reaches_the_console(tmp_path):
    group = AccountGroupFactory(name="operators")
    AccountFactory(email="olive.operator@example.test", full_name="Olive Operator", is_staff=True, is_superuser=True,
                   group=group)
    AccountFactory(email="nina@example.test", is_staff=False, group=group)
    with gateway_with_sso(tmp_path) as (base, provider), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            # the provider's certificate is the test's own: the browser is told to accept it (the gateway
            # itself verifies it, REQUESTS_CA_BUNDLE)
            page = browser.new_context(viewport=VIEWPORT, ignore_https_errors=True).new_page()
            page.goto(f"{base}/admin/")
            button = page.locator("#sso-login a")
            expect(button).to_have_text(f"Sign in with {PROVIDER_NAME}")
            expect(page.locator("#id_username")).to_be_visible()  # the password form stays
            page.screenshot(path=screenshot_path("sso-login-page"))

            button.click()
            page.wait_for_url(f"{provider.issuer}/authorize?*")
            page.fill("#username", "olive")
            page.click("#sign-in")
            page.wait_for_url(f"{base}/admin/")
            expect(page.get_by_text("olive.operator@example.test").first).to_be_visible()
            assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            page.screenshot(path=screenshot_path("sso-signed-in-console"))

            other = browser.new_context(viewport=VIEWPORT, ignore_https_errors=True).new_page()
            other.goto(f"{base}/admin/login/?next=/admin/")
            other.click("#sso-login a")
            other.fill("#username", "nina")
            other.click("#sign-in")
            other.wait_for_url(f"{base}/admin/login/?next=%2Fadmin%2F")
            expect(other.get_by_text("nina@example.test may not use the console.")).to_be_visible()
            other.screenshot(path=screenshot_path("sso-refused"))
        finally:
            browser.close()
