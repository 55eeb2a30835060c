"""The routine's pages in Chromium at 1366x768, as an operator meets them against a running gateway:
the form picks the model from the owner's, names the owner, has one schedule field and says when
the routine has no model to run with (as the home does); the runs' statuses are coloured, a
failed run is retried from the page and the retry links to it, a run's output keeps its lines; an
event refused for its signature shows; the secret is rotated, shown once, and the old one refused.
Screenshots are kept (tests/browser/support.py) and were looked at.

Playwright's synchronous API runs an event loop in this thread, where Django refuses database
queries: every row is made, and every expectation worked out, before the browser starts."""

import hashlib
import hmac

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from routines.routine_writes import new_token
from tests.browser.support import CHROMIUM, OVERFLOW, VIEWPORT, screenshot_path
from tests.factories import (
    PASSWORD,
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelServerFactory,
    RoutineFactory,
    RunFactory,
)

pytestmark = pytest.mark.django_db(transaction=True)

OUTPUT = "Three orders today:\n  - 8812 shipped\n  - 8813 waiting\nNothing else."



@pytest.fixture
def owner():
    """An account whose group may use gpu-box/llama3.1:8b only; no default model exists."""
    server = ModelServerFactory(name="gpu-box")
    allowed = ModelFactory(server=server, name="llama3.1:8b")
    ModelFactory(server=server, name="gpt-big")
    group = AccountGroupFactory(name="team", api_access=True, all_models=False)
    group.allowed_models.set([allowed])
    return AccountFactory(email="olive@example.test", full_name="Olive Owner", group=group)


def browse(p, base: str):
    browser = p.chromium.launch(executable_path=CHROMIUM)
    page = browser.new_context(viewport=VIEWPORT).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda message: errors.append(f"{message.text} {message.location.get('url', '')}")
            if message.type == "error" else None)
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "operator@example.test")
    page.fill("#id_password", PASSWORD)
    page.click("#login-form [type=submit]")
    page.wait_for_url(f"{base}/admin/")
    return browser, page, errors


def signed(secret: str, body: bytes) -> dict:
    return {"X-Svc-Signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
            "Content-Type": "application/json"}


def test_the_routine_form_picks_the_owner_s_model_and_says_when_it_cannot_run(live_gateway, operator, owner):
    routine = RoutineFactory(account=owner, name="Daily digest", prompt="Summarize the orders.", trigger="schedule",
                             schedule="0 8 * * *", delivery_targets=["inapp"], webhook_token=new_token())
    url = f"{live_gateway}/admin/routines/routine/{routine.pk}/change/"

    with sync_playwright() as p:
        browser, page, errors = browse(p, live_gateway)
        try:
            notice = page.locator("#home-default-model")
            expect(notice).to_contain_text("No default model is set")
            expect(notice.locator("#home-routines-without-model")).to_have_text("1 routine")
            notice.screenshot(path=screenshot_path("home-default-model-notice"))

            page.goto(url)
            expect(page.locator("#routine-model-note")).to_contain_text(
                "No model to run with: this routine names no model and no default model is set.")
            choices = page.locator("select[name=model] option")
            expect(choices).to_have_text([
                "None: the default model (no default model is set, so the routine cannot run)",
                "gpu-box/llama3.1:8b"])
            assert page.locator("input[name=account]").count() == 0
            expect(page.locator(f"a[href='/admin/accounts/account/{owner.pk}/change/']")).to_have_text(
                "olive@example.test")
            expect(page.locator("label", has_text="Schedule")).to_have_count(1)
            assert page.evaluate(OVERFLOW) == 0  # nothing wider than the window
            page.screenshot(path=screenshot_path("routine-form"), full_page=True)

            page.select_option("select[name=model]", "gpu-box/llama3.1:8b")
            page.click("button[name=_continue]")
            expect(page.locator("select[name=model]")).to_have_value("gpu-box/llama3.1:8b")
            expect(page.locator("#routine-model-note")).to_have_count(0)
            page.goto(f"{live_gateway}/admin/")
            expect(page.locator("#home-routines-without-model")).to_have_count(0)
            assert errors == []
        finally:
            browser.close()


def test_runs_are_coloured_retried_and_keep_their_lines_and_refused_events_and_the_secret_show(
        live_gateway, operator, owner):
    routine = RoutineFactory(account=owner, name="Order digest", prompt="Summarize the orders.", trigger="webhook",
                             delivery_targets=["inapp"], webhook_secret="old-secret", webhook_token=new_token(),
                             model="gpu-box/llama3.1:8b")
    ok = RunFactory(routine=routine, trigger="webhook", status="succeeded", model="gpu-box/llama3.1:8b", output=OUTPUT)
    failed = RunFactory(routine=routine, trigger="webhook", status="failed", model="gpu-box/llama3.1:8b",
                        error="503: No model of the chain answered (gpu-box/llama3.1:8b: 503 The model server could "
                              "not be reached.).\nThis run is not tried again by itself.")
    RunFactory(routine=routine, trigger="manual", status="running")
    RunFactory(routine=routine, trigger="manual", status="queued")
    hook = f"{live_gateway}/api/v1/hooks/{routine.webhook_token}"
    body = b'{"order": 8814}'
    assert httpx.post(hook, content=body, headers=signed("a-guess", body), timeout=30).status_code == 401
    url = f"{live_gateway}/admin/routines/routine/{routine.pk}/change/"

    with sync_playwright() as p:
        browser, page, errors = browse(p, live_gateway)
        try:
            page.goto(url)
            colours = {}
            for status in ("succeeded", "failed", "running", "queued"):
                badge = page.locator(f"#last-runs .run-status-{status}")
                expect(badge).to_have_count(1)
                colours[status] = badge.evaluate("el => getComputedStyle(el).backgroundColor")
            assert len(set(colours.values())) == 4 and "rgba(0, 0, 0, 0)" not in colours.values(), colours
            refused = page.locator("#refused-events tr.refused-event")
            expect(refused).to_have_count(1)
            expect(refused).to_contain_text("signature wrong")
            expect(refused).to_contain_text("x-svc-signature")
            assert page.locator("#refused-events").evaluate("el => el.parentElement.scrollWidth "
                                                            "<= el.parentElement.clientWidth")  # all of it seen
            assert page.evaluate(OVERFLOW) == 0
            page.locator("#last-runs").scroll_into_view_if_needed()
            page.screenshot(path=screenshot_path("routine-page-runs-and-refused-events"), full_page=True)

            page.click(f"button.run-retry[data-run='{failed.pk}']")
            page.wait_for_url(url)
            expect(page.get_by_text(f"a retry of run {failed.pk}")).to_be_visible()
            rows = page.locator("#last-runs tbody tr[data-run]")
            expect(rows).to_have_count(5)
            expect(rows.first.locator(".run-retry-of")).to_have_text(f"retry of Run {failed.pk}")
            expect(rows.first.locator(".run-status-queued")).to_have_count(1)
            page.locator("#last-runs").scroll_into_view_if_needed()
            page.screenshot(path=screenshot_path("routine-page-after-retry"))

            page.goto(f"{live_gateway}/admin/routines/run/{failed.pk}/change/")
            expect(page.locator(".run-retried-as")).to_contain_text("Retried as Run")
            page.screenshot(path=screenshot_path("routine-failed-run-retried"), full_page=True)
            page.goto(f"{live_gateway}/admin/routines/run/")
            expect(page.locator(".run-status-failed")).to_have_count(1)
            page.screenshot(path=screenshot_path("routine-runs-list"))
            page.goto(f"{live_gateway}/admin/routines/run/{ok.pk}/change/")
            output = page.locator("pre.run-output")
            expect(output).to_have_text(OUTPUT)
            lines = output.evaluate("el => Math.round(el.getBoundingClientRect().height / "
                                    "parseFloat(getComputedStyle(el).lineHeight))")
            assert lines >= 4, lines  # four lines, not one run-on line
            assert page.evaluate(OVERFLOW) == 0
            page.screenshot(path=screenshot_path("routine-run-output"), full_page=True)

            page.goto(url)
            page.click("#secret-rotate")
            expect(page.locator("#content-main")).to_contain_text("The current secret stops working at once")
            page.click("#secret-rotate-confirm")
            secret = page.locator("#webhook-secret").input_value()
            assert len(secret) == 64
            page.screenshot(path=screenshot_path("routine-secret-shown"))
            page.click("#webhook-secret-done")
            page.wait_for_url(url)
            assert secret not in page.content()
            assert errors == []
        finally:
            browser.close()

    assert httpx.post(hook, content=body, headers=signed("old-secret", body), timeout=30).status_code == 401
    answer = httpx.post(hook, content=body, headers=signed(secret, body), timeout=30)
    assert answer.status_code == 200 and answer.json()["queued"] is True
