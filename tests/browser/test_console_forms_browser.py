"""The console's forms as an operator meets them in Chromium at 1366x768: a secret's field (a model
server's API key, an MCP server's auth header value) is drawn like every other input and takes what is
typed, on the add form and the change form (a "clear" box only where something is stored); the server
form shows "Test connection" without scrolling and a setting of one kind of server only for that kind; a
group's ceilings read "no limit"; the console and its error pages have an icon. Screenshots of the server
form, the group page and the MCP form are kept (tests/browser/support.py) and were looked at.

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made before the browser starts, and what the forms saved is read after it closed."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect, sync_playwright

from gateway.models import ModelServer
from native.models import McpServer
from tests.browser.support import OVERFLOW, screenshot_path
from tests.browser.test_keys_servers_routines_browser import browse, pytestmark  # noqa: F401 — its database marker
from tests.factories import AccountGroupFactory, McpServerFactory, ModelServerFactory

# What makes an input seen: the theme's border and a width for a key (Django's bare password input
# had neither under the theme: no border, no background, only its help text showed).
DRAWN = """(selector) => { const field = document.querySelector(selector);
  return {border: parseFloat(getComputedStyle(field).borderTopWidth), width: field.getBoundingClientRect().width}; }"""


def assert_drawn(page, selector: str) -> None:
    field = page.locator(selector)
    expect(field).to_be_visible()
    drawn = page.evaluate(DRAWN, selector)
    assert drawn["border"] >= 1 and drawn["width"] >= 300, (selector, drawn)


def type_into(page, selector: str, text: str) -> None:
    """As a person does: a click on the field, then keys (a field that cannot be clicked fails here)."""
    page.locator(selector).click()
    page.keyboard.type(text)
    expect(page.locator(selector)).to_have_value(text)


def test_a_model_servers_api_key_is_seen_and_typed_into_on_the_add_and_change_forms(live_gateway, operator,
                                                                                    closed_port):
    saved = ModelServerFactory(name="openai", base_url=f"http://127.0.0.1:{closed_port}/v1", api_key="sk-old",
                               enabled=False)

    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            page.goto(f"{live_gateway}/admin/gateway/modelserver/add/")
            assert_drawn(page, "#id_api_key")
            expect(page.locator(".field-api_key")).to_contain_text("Never shown again once saved")
            expect(page.locator("#id_clear_api_key")).to_have_count(0)  # nothing stored yet: nothing to clear
            page.fill("#id_name", "cloud")
            page.fill("#id_base_url", f"http://127.0.0.1:{closed_port}/v1")
            type_into(page, "#id_api_key", "sk-typed-on-add")
            expect(page.locator(".field-structured_output")).to_be_hidden()  # an OpenAI server's form
            page.select_option("#id_kind", "anthropic")
            expect(page.locator(".field-structured_output")).to_be_visible()
            page.select_option("#id_kind", "openai")
            page.click("#id_enabled")  # disabled: no discovery against the closed port
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("model-server-add"), full_page=True)
            page.click("[name=_continue]")
            expect(page.locator("#id_api_key")).to_have_value("")  # the key is never sent back to the page

            page.goto(f"{live_gateway}/admin/gateway/modelserver/{saved.pk}/change/")
            expect(page.locator("#test-connection")).to_be_in_viewport()  # no scrolling to find it
            expect(page.locator(".field-structured_output")).to_be_hidden()
            assert_drawn(page, "#id_api_key")
            expect(page.locator(".field-api_key")).to_contain_text("Leave empty to keep the stored API key")
            expect(page.locator("#id_clear_api_key")).to_be_visible()
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("model-server-change"))
            type_into(page, "#id_api_key", "sk-typed-on-change")
            page.click("[name=_continue]")
            expect(page.get_by_text("was changed successfully")).to_be_visible()
        finally:
            browser.close()

    assert ModelServer.objects.get(name="cloud").api_key == "sk-typed-on-add"
    assert ModelServer.objects.get(pk=saved.pk).api_key == "sk-typed-on-change"


def test_an_anthropic_servers_structured_output_is_shown_on_its_page(live_gateway, operator):
    server = ModelServerFactory(name="claude", kind="anthropic", base_url="https://api.anthropic.com",
                                structured_output="output_config", enabled=False)

    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            page.goto(f"{live_gateway}/admin/gateway/modelserver/{server.pk}/change/")
            expect(page.locator(".field-structured_output")).to_be_visible()
            expect(page.locator("#id_structured_output")).to_have_value("output_config")
        finally:
            browser.close()


def test_an_mcp_servers_auth_header_value_is_seen_and_typed_into(live_gateway, operator):
    AccountGroupFactory(name="research")
    saved = McpServerFactory(name="search", auth_header_name="Authorization", auth_header_value="Bearer old")

    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            page.goto(f"{live_gateway}/admin/native/mcpserver/add/")
            assert_drawn(page, "#id_auth_header_value")
            expect(page.locator("#id_clear_auth_header_value")).to_have_count(0)
            page.fill("#id_name", "files")
            page.fill("#id_url", "http://127.0.0.1:9000/mcp")
            page.fill("#id_auth_header_name", "Authorization")
            type_into(page, "#id_auth_header_value", "Bearer typed-on-add")
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("mcp-server-add"), full_page=True)
            page.click("[name=_save]")
            page.wait_for_url(f"{live_gateway}/admin/native/mcpserver/")

            page.goto(f"{live_gateway}/admin/native/mcpserver/{saved.pk}/change/")
            assert_drawn(page, "#id_auth_header_value")
            expect(page.locator("#id_clear_auth_header_value")).to_be_visible()
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("mcp-server-change"), full_page=True)
            type_into(page, "#id_auth_header_value", "Bearer typed-on-change")
            page.click("[name=_save]")
            page.wait_for_url(f"{live_gateway}/admin/native/mcpserver/")
        finally:
            browser.close()

    assert McpServer.objects.get(name="files").auth_header_value == "Bearer typed-on-add"
    assert McpServer.objects.get(pk=saved.pk).auth_header_value == "Bearer typed-on-change"


def test_a_groups_page_fits_the_screen_and_says_no_limit(live_gateway, operator):
    group = AccountGroupFactory(name="research", daily_tokens=50000, all_models=False)

    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            page.goto(f"{live_gateway}/admin/accounts/accountgroup/{group.pk}/change/")
            assert page.evaluate(OVERFLOW) <= 0
            expect(page.locator("#id_daily_tokens")).to_have_value("50000")
            expect(page.locator("#id_weekly_tokens")).to_have_value("no limit")
            expect(page.locator("#id_monthly_budget")).to_have_value("no limit")
            page.screenshot(path=screenshot_path("account-group-change"))
            page.screenshot(path=screenshot_path("account-group-change-whole"), full_page=True)
            page.fill("#id_daily_tokens", "no limit")
            page.click("[name=_save]")
            page.wait_for_url(f"{live_gateway}/admin/accounts/accountgroup/")
            expect(page.locator("#result_list")).to_contain_text("no limit")
            cells = page.locator("#result_list td").all_inner_texts()  # a name like "group-11" holds "-1" too
            assert "-1" not in [cell.strip() for cell in cells]
            assert page.evaluate(OVERFLOW) <= 0
        finally:
            browser.close()

    group.refresh_from_db()
    assert group.daily_tokens == -1


def test_the_console_and_its_error_pages_have_an_icon(live_gateway, operator):
    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            console_icon = page.locator("link[rel=icon]").get_attribute("href")
            page.goto(f"{live_gateway}/admin/no-such-page/")
            expect(page.locator("#error-page")).to_be_visible()
            error_icon = page.locator("link[rel=icon]").get_attribute("href")
        finally:
            browser.close()

    assert console_icon == error_icon == "/static/console/favicon.svg"
    served = httpx.get(f"{live_gateway}{console_icon}", timeout=30)
    assert served.status_code == 200 and served.headers["content-type"] == "image/svg+xml"
    assert served.text.startswith("<svg")


def test_a_cloud_servers_own_settings_show_for_its_kind_and_its_secrets_are_write_only(live_gateway, operator):
    """An operator adding AWS Bedrock sees where its region and access key go (and Azure's settings only for
    Azure); the address left empty becomes the region's; the secret is kept and never sent back."""
    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            page.goto(f"{live_gateway}/admin/gateway/modelserver/add/")
            for hidden in (".field-region", ".field-aws_secret_access_key", ".field-api_version"):
                expect(page.locator(hidden)).to_be_hidden()  # an OpenAI server's form
            page.select_option("#id_kind", "azure")
            expect(page.locator(".field-api_version")).to_be_visible()
            assert_drawn(page, "#id_azure_client_secret")
            expect(page.locator(".field-region")).to_be_hidden()
            page.select_option("#id_kind", "bedrock")
            for shown in (".field-region", ".field-aws_access_key_id", ".field-anthropic_betas",
                          ".field-structured_output"):
                expect(page.locator(shown)).to_be_visible()
            expect(page.locator(".field-api_version")).to_be_hidden()
            expect(page.locator(".field-is_remote")).to_be_hidden()  # a cloud is always remote
            page.fill("#id_name", "aws")
            page.fill("#id_region", "eu-central-1")
            page.fill("#id_aws_access_key_id", "AKIAIOSFODNN7EXAMPLE")
            assert_drawn(page, "#id_aws_secret_access_key")
            type_into(page, "#id_aws_secret_access_key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
            page.click("#id_enabled")  # disabled: nothing asks the real AWS
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("model-server-add-bedrock"), full_page=True)
            page.click("[name=_continue]")
            expect(page.get_by_text("was added successfully")).to_be_visible()
            expect(page.locator("#id_aws_secret_access_key")).to_have_value("")  # never sent back to the page
            expect(page.locator("#id_base_url")).to_have_value("https://bedrock-runtime.eu-central-1.amazonaws.com")
        finally:
            browser.close()

    aws = ModelServer.objects.get(name="aws")
    assert (aws.kind, aws.region, aws.aws_secret_access_key, aws.is_remote) == (
        "bedrock", "eu-central-1", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", True)
