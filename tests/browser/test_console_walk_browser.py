"""Every page of the console, walked as staff in Chromium at 1366x768: none scrolls sideways, none
logs an error (Playwright's `console` messages of type error and its `pageerror` events), and none
cites an issue number to the operator (the product's history is not theirs to read). A screenshot of
each page is kept (tests/browser/support.py, "walk-" and the page's path), so every page can be looked at.

The pages are read from the console itself, so that a page added later is walked without a change
here: the sidebar's links (the home, the usage console, the API contract and every admin list, from
gateway/console/home/sidebar.py), and for each model of the admin's registry its add form (when the
admin allows adding), the change form of one of its rows, its history and its audit trail. A model
registered later needs a row below (`one_of_each`): the test says which model has none.

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made, and every address worked out, before the browser starts."""

from __future__ import annotations

import re

from django.contrib import admin
from django.test import RequestFactory
from django.urls import NoReverseMatch, reverse
from playwright.sync_api import sync_playwright

from gateway.console.home.sidebar import navigation
from tests.browser.support import OVERFLOW, screenshot_path
from tests.browser.test_keys_servers_routines_browser import browse, pytestmark  # noqa: F401 — its database marker
from tests.factories import (
    AliasDeploymentFactory,
    AliasFactory,
    BatchFactory,
    BatchLineFactory,
    CallRecordFactory,
    CollectionFactory,
    ConversationFactory,
    DocumentFactory,
    EventFactory,
    InboxMessageFactory,
    LinkedChannelFactory,
    McpServerFactory,
    ModelFactory,
    ModelServerFactory,
    ProfileFactory,
    RoutineFactory,
    RunFactory,
    StoredFileFactory,
    UsageRecordFactory,
)

ISSUE_NUMBER = re.compile(r"\bissue \d+", re.IGNORECASE)


def one_of_each(operator) -> None:
    """A row of every model the console shows, so each has a change form to open."""
    server = ModelServerFactory(name="gpu-box", base_url="http://127.0.0.1:9/v1", api_key="sk-walk")
    model = ModelFactory(server=server, name="llama3.1:8b")
    AliasDeploymentFactory(alias=AliasFactory(name="fast"), model=model)
    UsageRecordFactory(account=operator, model="gpu-box/llama3.1:8b")
    CallRecordFactory(account=operator, model="gpu-box/llama3.1:8b")
    ProfileFactory(name="helper", model=model)
    McpServerFactory(name="tools", auth_header_name="Authorization", auth_header_value="Bearer walk")
    DocumentFactory(collection=CollectionFactory(account=operator, name="notes"), name="readme.txt")
    ConversationFactory(account=operator)
    routine = RoutineFactory(account=operator, name="Daily digest")
    EventFactory(routine=routine, event_id="delivery-1", body='{"commits": 3}')
    RunFactory(routine=routine, status="succeeded", output="Three commits.\nAll green.")
    InboxMessageFactory(account=operator, title="Digest", body="Three commits.")
    LinkedChannelFactory(account=operator)
    BatchLineFactory(batch=BatchFactory(account=operator, input_file=StoredFileFactory(account=operator)))


def shot_name(path: str) -> str:
    """A screenshot's name for a page: its path in words, "/admin/gateway/model/3/change/" becoming
    "walk-gateway-model-3-change"."""
    return "walk-" + (re.sub(r"[^a-z0-9]+", "-", path.removeprefix("/admin/").lower()).strip("-") or "home")


def reversed_or_none(name: str, *args) -> str | None:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def console_pages(operator) -> list[str]:
    """The console's pages as `operator` reaches them: the sidebar's links, then each registered model's
    add form, one change form, its history and its audit trail."""
    request = RequestFactory().get("/admin/")
    request.user = operator
    pages = [item["link"] for group in navigation(request) for item in group["items"]]
    missing = []
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        prefix = f"admin:{opts.app_label}_{opts.model_name}"
        if model_admin.has_add_permission(request):
            pages.append(reverse(f"{prefix}_add"))
        row = model._default_manager.order_by("pk").first()
        if row is None:
            missing.append(opts.label)
            continue
        for name in ("change", "history", "auditlog"):
            if page := reversed_or_none(f"{prefix}_{name}", row.pk):
                pages.append(page)
    assert not missing, f"no row to open the change form of: {missing}; make one in one_of_each"
    return list(dict.fromkeys(pages))


def test_no_console_page_scrolls_sideways_or_logs_an_error(live_gateway, operator):
    one_of_each(operator)
    pages = console_pages(operator)
    assert len(pages) > 40  # every list, form and page named above: a walk of a handful would prove nothing

    found: dict[str, list[str]] = {}
    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        errors: list[str] = []
        page.on("console", lambda message: message.type == "error" and errors.append(f"console: {message.text}"))
        page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
        try:
            for path in pages:
                errors.clear()
                response = page.goto(f"{live_gateway}{path}", wait_until="load")
                faults = list(errors)
                if response is None or response.status != 200:
                    faults.append(f"status {response.status if response else 'none'}")
                if (wider := page.evaluate(OVERFLOW)) > 0:
                    faults.append(f"scrolls sideways by {wider} px")
                if cited := ISSUE_NUMBER.findall(page.locator("body").inner_text()):
                    faults.append(f"cites {cited}")
                if faults:
                    found[path] = faults
                page.screenshot(path=screenshot_path(shot_name(path)), full_page=True)
        finally:
            browser.close()

    assert not found, "\n".join(f"{path}: {'; '.join(faults)}" for path, faults in found.items())
