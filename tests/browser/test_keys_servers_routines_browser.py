"""Keys, model servers and routines in the console, as an operator does them in Chromium at 1366x768
against a running gateway:
a key generated on an account's page works once shown and the old one is refused; "Test connection"
on a server saved without /v1 reports the server's 404; a server's health is about its address of now
(a success seen right after its discovery, nothing of its old address once it moved); a routine's page
shows its last runs, copies its whole webhook URL and runs it now. Screenshots of the server page, the
server list after a move and the routine page are kept (tests/browser/support.py) and were looked at.

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made, and every expectation worked out, before the browser starts."""

import json
import re

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from accounts.keys import KEY_PATTERN
from routines.routine_writes import new_token
from tests.browser.support import CHROMIUM, OVERFLOW, VIEWPORT, screenshot_path
from tests.factories import (
    PASSWORD,
    AccountFactory,
    AccountGroupFactory,
    EventFactory,
    ModelFactory,
    ModelServerFactory,
    RoutineFactory,
    RunFactory,
    api_key_for,
    bearer,
)
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db(transaction=True)




def browse(p, base: str):
    browser = p.chromium.launch(executable_path=CHROMIUM)
    context = browser.new_context(viewport=VIEWPORT)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    page = context.new_page()
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "operator@example.test")
    page.fill("#id_password", PASSWORD)
    page.click("#login-form [type=submit]")
    page.wait_for_url(f"{base}/admin/")
    return browser, page


def test_a_key_generated_in_the_console_works_once_shown_and_the_old_one_is_refused(live_gateway, operator):
    holder = AccountFactory(email="holder@example.test", group=AccountGroupFactory(name="api", api_access=True))
    old = api_key_for(holder)
    verify = f"{live_gateway}/api/v1/auth/verify"
    assert httpx.get(verify, headers=bearer(old), timeout=30).status_code == 200

    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            page.goto(f"{live_gateway}/admin/accounts/account/{holder.pk}/change/")
            page.click("#api-key-generate")
            expect(page.locator("#content-main")).to_contain_text("It replaces the current key")
            page.screenshot(path=screenshot_path("account-generate-key-question"))
            page.click("#key-generate-confirm")
            key = page.locator("#api-key").input_value()
            page.click("#api-key-copy")
            expect(page.locator("#api-key-copy")).to_have_text("Copied")
            copied = page.evaluate("() => navigator.clipboard.readText()")
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("account-new-key"), full_page=True)
            page.click("#api-key-done")
            expect(page.locator("#api-key-last-used")).to_have_text("never")
            page.locator("#api-key-panel").scroll_into_view_if_needed()
            page.screenshot(path=screenshot_path("account-key-section"))
            assert key not in page.content()  # never shown again
        finally:
            browser.close()

    assert KEY_PATTERN.match(key) and copied == key
    assert httpx.get(verify, headers=bearer(key), timeout=30).status_code == 200
    refused = httpx.get(verify, headers=bearer(old), timeout=30)
    assert refused.status_code == 401 and refused.json() == {"message": "Unauthenticated."}


def test_test_connection_reports_a_base_url_without_v1(live_gateway, operator, upstream):  # noqa: F811
    server = ModelServerFactory(name="gpu-box", base_url=upstream.url)  # without /v1
    ModelFactory(server=server, name="llama3.1:8b")
    right = ModelServerFactory(name="gpu-box-v1", base_url=f"{upstream.url}/v1")
    ModelFactory(server=right, name="llama3.1:8b")
    upstream.configure(reply="Connected and answering.")

    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            page.goto(f"{live_gateway}/admin/gateway/modelserver/{server.pk}/change/")
            page.click("#test-connection")
            # the message (exactly); the page's "Last failure" now says it too, after its time
            expect(page.get_by_text("Chat call to gpu-box/llama3.1:8b failed: 404 Unknown request URL: POST "
                                    "/chat/completions.", exact=True)).to_be_visible()
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("model-server-test-connection"), full_page=True)
            page.goto(f"{live_gateway}/admin/gateway/modelserver/{right.pk}/change/")
            page.click("#test-connection")
            expect(page.get_by_text("Chat call to gpu-box-v1/llama3.1:8b answered: “Connected and answering.”"))\
                .to_be_visible()
        finally:
            browser.close()


def test_a_servers_health_is_of_its_address_of_now(live_gateway, operator, upstream, closed_port):  # noqa: F811
    """Added and discovered, its last success is known at once (and its model, the first, the default);
    moved to an address where nothing listens and tested, the list and the home show the test's failure
    and nothing of the old address's success."""
    upstream.configure(models=["echo-1"])
    servers = f"{live_gateway}/admin/gateway/modelserver/"
    moment = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")

    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            page.goto(f"{servers}add/")
            page.fill("#id_name", "oa")
            page.fill("#id_base_url", f"{upstream.url}/v1")
            page.click("[name=_save]")
            page.wait_for_url(servers)
            expect(page.get_by_text("oa/echo-1 is now the default model, chosen automatically")).to_be_visible()
            row = page.locator("#result_list tbody tr", has_text="oa")
            expect(row.locator("td.field-last_success")).to_have_text(moment)
            expect(row.locator("td.field-last_failure")).to_have_text("none seen")

            row.locator("a", has_text="oa").first.click()
            page.fill("#id_base_url", f"http://127.0.0.1:{closed_port}/v1")
            with page.expect_navigation():
                page.click("[name=_continue]")
            page.click("#test-connection")
            expect(page.get_by_text("Chat call to oa/echo-1 failed: 503", exact=False).first).to_be_visible()
            page.goto(servers)
            expect(row.locator("td.field-last_success")).to_have_text("never seen")
            failure = row.locator("td.field-last_failure")
            expect(failure).to_contain_text("Test connection: Chat call to oa/echo-1 failed")
            expect(failure).to_have_text(moment)
            key = row.locator("td.field-key_set span")  # a local server's: whole, on one line beside the failure
            expect(key).to_have_text("not needed")
            assert key.evaluate("e => e.getClientRects().length") == 1
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("model-server-list-moved"), full_page=True)
            page.goto(f"{live_gateway}/admin/")
            home = page.locator('#home-servers tr[data-server="oa"] td')
            expect(home.nth(2)).to_have_text("never seen")
            expect(home.nth(3)).to_contain_text("Test connection: Chat call to oa/echo-1 failed")
        finally:
            browser.close()


def test_a_routine_page_shows_its_runs_copies_its_webhook_url_and_runs_it_now(live_gateway, operator):
    owner = AccountFactory(email="olive@example.test", group=AccountGroupFactory(name="owners", api_access=True))
    routine = RoutineFactory(account=owner, name="Daily digest", prompt="Summarize the event for the team.",
                             trigger="webhook", delivery_targets=["inapp", "email:olive@example.test"],
                             webhook_secret=None, webhook_token=new_token())
    event = EventFactory(routine=routine, event_id="delivery-8812", content_type="application/json",
                         body=json.dumps({"repository": "gateway", "pusher": "<olive>", "commits": 3}))
    now = timezone.now()
    ok = RunFactory(routine=routine, trigger="webhook", status="succeeded", model="gpu-box/llama3.1:8b",
                    source_event=event, event_id=event.event_id, output="Three commits.", started_at=now,
                    finished_at=now)
    failed = RunFactory(routine=routine, trigger="schedule", status="failed", model="gpu-box/llama3.1:8b",
                        error="503: No model of the chain answered (gpu-box/llama3.1:8b: 503 The model server could "
                              "not be reached.). This run is not tried again by itself: run the routine again (Run "
                              "now) once the model answers.", started_at=now, finished_at=now)
    whole = f"{live_gateway}/api/v1/hooks/{routine.webhook_token}"

    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        try:
            page.goto(f"{live_gateway}/admin/routines/routine/{routine.pk}/change/")
            rows = page.locator("#last-runs tbody tr[data-run]")
            expect(rows).to_have_count(2)
            expect(rows.first).to_contain_text(f"Run {failed.pk}")
            expect(page.locator("#last-runs tr.run-error")).to_contain_text("503: No model of the chain answered")
            expect(page.locator("input[name=delivery_targets_1]")).to_have_value("email:olive@example.test")
            text = page.locator(".webhook-url-text")
            expect(text).to_have_text(f"{whole[:-42]}" + "•" * 12)
            assert routine.webhook_token not in page.content()
            page.click(".webhook-url-copy")
            expect(page.locator(".webhook-url-copy")).to_have_text("Copied")
            assert page.evaluate("() => navigator.clipboard.readText()") == whole
            assert page.evaluate(OVERFLOW) <= 0
            page.screenshot(path=screenshot_path("routine-page"), full_page=True)
            page.locator("#last-runs").scroll_into_view_if_needed()
            page.screenshot(path=screenshot_path("routine-page-runs"))

            page.click(f"#last-runs a:text('Run {ok.pk}')")
            expect(page.locator("pre.event-payload")).to_contain_text('"pusher": "<olive>"')
            page.screenshot(path=screenshot_path("routine-run-page"), full_page=True)

            page.goto(f"{live_gateway}/admin/routines/routine/{routine.pk}/change/")
            page.click("#run-now")
            expect(page.get_by_text("is queued: see it.")).to_be_visible()
            expect(page.locator("#last-runs tbody tr[data-run]")).to_have_count(3)
        finally:
            browser.close()

    runs = httpx.get(f"{live_gateway}/api/v1/routines/{routine.pk}/runs", headers=bearer(api_key_for(owner)),
                     timeout=30).json()["runs"]
    assert [(r["trigger"], r["status"]) for r in runs][0] == ("manual", "queued")
