"""The API contract, as an operator sees it at 1366x768: the API contract page draws the served OpenAPI
document in Swagger UI inside the console (its files from the project), renders the document's Markdown,
lists the operations (/v1/chat/completions among them) with their schemas, fits the width, and "Try it
out" sends a real request with the operator's API key given to "Authorize" as a bearer token."""

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.browser.support import CHROMIUM, VIEWPORT
from tests.browser.support import screenshot_path as screenshot
from tests.factories import PASSWORD, AccountFactory, AccountGroupFactory, api_key_for

pytestmark = pytest.mark.django_db(transaction=True)


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")



def test_swagger_ui_draws_the_contract_and_tries_a_call_with_the_key(live_gateway):
    operator = AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True,
                              group=AccountGroupFactory(name="ops", api_access=True))
    key = api_key_for(operator)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            elsewhere = []
            page.on("request", lambda r: r.url.startswith(live_gateway) or elsewhere.append(r.url))
            page.goto(f"{live_gateway}/admin/login/?next=/admin/api-contract/")
            page.fill("#id_username", operator.email)
            page.fill("#id_password", PASSWORD)
            page.click("#login-form [type=submit]")
            page.wait_for_url(f"{live_gateway}/admin/api-contract/")

            chat = page.locator(".opblock-post", has=page.locator('[data-path="/v1/chat/completions"]'))
            expect(chat).to_have_count(1)
            expect(page.locator(".information-container .renderedMarkdown li")).to_have_count(2)  # a Markdown list
            expect(page.locator(".information-container .renderedMarkdown strong").first).to_have_text("/v1")
            assert "**" not in page.locator(".information-container").inner_text()
            assert page.locator(".opblock").count() > 50
            assert no_sideways_scroll(page)
            page.screenshot(path=screenshot("api-contract"))

            chat.locator(".opblock-summary").click()
            expect(chat.locator(".opblock-body")).to_be_visible()
            described = chat.locator(".opblock-description-wrapper .renderedMarkdown code", has_text="[DONE]")
            expect(described).to_have_count(1)  # the description's Markdown, rendered
            expect(chat.locator(".try-out__btn")).to_be_visible()
            expect(chat.locator(".opblock-section-request-body")).to_be_visible()
            chat.locator(".opblock-section-request-body .tablinks[data-name='model']").click()  # the schema
            expect(chat.locator(".opblock-section-request-body .model-box").first).to_contain_text("messages")
            assert no_sideways_scroll(page)
            page.screenshot(path=screenshot("api-contract-chat-completions"), full_page=False)

            page.click(".auth-wrapper .authorize")
            bearer = page.locator(".auth-container").first  # the document's first scheme: an API key as bearer
            expect(bearer).to_contain_text("bearer (http, Bearer)")
            bearer.locator("input").first.fill(key)
            bearer.locator("button.authorize").click()
            page.click(".auth-btn-wrapper .btn-done")
            models = page.locator(".opblock-get", has=page.locator('[data-path="/v1/models"]'))
            models.locator(".opblock-summary").click()
            models.locator(".try-out__btn").click()
            models.locator(".execute").click()
            expect(models.locator(".live-responses-table tbody td.response-col_status")).to_have_text("200")
            expect(models.locator(".curl-command")).to_contain_text(f"Authorization: Bearer {key}")
            models.locator(".live-responses-table").scroll_into_view_if_needed()
            assert no_sideways_scroll(page)
            page.screenshot(path=screenshot("api-contract-try-it"))
            assert elsewhere == []  # nothing loaded from another host
        finally:
            browser.close()
