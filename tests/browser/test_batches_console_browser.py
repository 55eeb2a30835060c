"""The console's Batches and Files pages in Chromium at 1366x768, as an operator meets them against a running
gateway: the list of every account's batches with their coloured status and progress bar, a batch's page with its
counts, its files and its lines 100 a page (the next page fetched in place), its Cancel; the Files page. None
scrolls sideways or logs an error. Screenshots are kept (tests/browser/support.py) and were looked at.

Playwright's synchronous API runs an event loop in this thread, where Django refuses database queries: every row
is made, and every expectation worked out, before the browser starts."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.utils import quote
from playwright.sync_api import expect, sync_playwright

from batches.models import Batch, BatchLine
from tests.browser.support import OVERFLOW, screenshot_path
from tests.browser.test_keys_servers_routines_browser import browse
from tests.factories import AccountFactory, BatchFactory, BatchLineFactory, StoredFileFactory

pytestmark = pytest.mark.django_db(transaction=True)

Status, Line = Batch.Status, BatchLine.Status
CREATED = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


def make_batches(operator) -> Batch:
    """Batches of two accounts in every status, the running one with 130 lines (two pages of them)."""
    ana, bob = AccountFactory(email="ana.long-address@example.test"), AccountFactory(email="bob@example.test")
    given = StoredFileFactory(account=ana, filename="nightly-evaluation-input.jsonl", bytes=1_536_000)
    running = BatchFactory(id="batch_" + "a" * 24, account=ana, status=Status.IN_PROGRESS, input_file=given,
                           input_file_name=given.id, created_at=CREATED, metadata={"job": "nightly"})
    rows = [BatchLineFactory.build(batch=running, index=n, custom_id=f"eval-question-{n:05d}",
                                   status=Line.SUCCEEDED if n < 90 else Line.ERRORED if n < 97 else Line.QUEUED,
                                   status_code=200 if n < 90 else 429 if n < 97 else None,
                                   ended_at=CREATED + timedelta(seconds=n) if n < 97 else None) for n in range(130)]
    BatchLine.objects.bulk_create(rows)
    for n, status in enumerate((Status.VALIDATING, Status.FINALIZING, Status.COMPLETED, Status.FAILED,
                                Status.EXPIRED, Status.CANCELLING, Status.CANCELLED)):
        anthropic = n % 3 == 0
        BatchFactory(id=f"{'msgbatch' if anthropic else 'batch'}_{n:024x}", account=bob if n % 2 else operator,
                     status=status, created_at=CREATED + timedelta(hours=n),
                     kind=Batch.Kind.ANTHROPIC if anthropic else Batch.Kind.OPENAI,
                     endpoint="/v1/messages" if anthropic else "/v1/responses")
    StoredFileFactory(account=bob, filename="batch_output.jsonl", purpose="batch_output", bytes=2_621_440,
                      expires_at=CREATED + timedelta(days=30))
    return running


def test_the_batches_list_and_a_batchs_page_fit_the_window_and_cancel(live_gateway, operator):
    running = make_batches(operator)
    shots = {}

    with sync_playwright() as p:
        browser, page = browse(p, live_gateway)
        errors: list[str] = []
        page.on("console", lambda message: message.type == "error" and errors.append(f"console: {message.text}"))
        page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
        try:
            page.goto(f"{live_gateway}/admin/batches/batch/")
            expect(page.locator("#result_list tbody tr")).to_have_count(8)
            bar = page.locator(f"tr:has-text('{running.id}') .batch-progress")
            expect(bar).to_contain_text("97 / 130")
            expect(bar.locator("[title='Ended: 74%']")).to_have_attribute("style", "width: 74%")
            expect(page.locator(".batch-status-in_progress")).to_have_text("In Progress")
            shots["list"] = page.evaluate(OVERFLOW)
            page.screenshot(path=screenshot_path("batches-list"), full_page=True)

            page.click(f"#result_list a[href='/admin/batches/batch/{quote(running.id)}/change/']")
            expect(page.locator("#lines-data tr.form-row")).to_have_count(100)
            expect(page.locator(".field-outcome .line-status-errored").first).to_have_text("Errored")
            shots["page"] = page.evaluate(OVERFLOW)
            page.screenshot(path=screenshot_path("batch-page"), full_page=True)
            page.screenshot(path=screenshot_path("batch-page-first-screen"))  # what the operator sees on arrival
            page.locator("#lines-heading").scroll_into_view_if_needed()
            page.screenshot(path=screenshot_path("batch-page-lines"))

            page.locator(".inline-pagination a", has_text="2").click()  # the theme fetches the next page in place
            expect(page.locator("#lines-data tr.form-row")).to_have_count(30)
            expect(page.locator("#lines-data tr.form-row .field-custom_id").first).to_have_text("eval-question-00100")
            shots["lines-2"] = page.evaluate(OVERFLOW)
            page.locator("#lines-data").screenshot(path=screenshot_path("batch-lines-page-2"))

            page.click("button.batch-cancel")
            expect(page.locator(".batch-status-cancelling")).to_have_text("Cancelling")
            expect(page.locator("body")).to_contain_text(f"Batch {running.id} is cancelling")
            expect(page.locator("button.batch-cancel")).to_have_count(0)
            page.screenshot(path=screenshot_path("batch-page-cancelling"))  # the message and the status, on top

            page.goto(f"{live_gateway}/admin/gateway/storedfile/")
            expect(page.locator("#result_list tbody tr")).to_have_count(2)
            expect(page.locator(".file-size").first).to_have_text("2.5\xa0MB")
            shots["files"] = page.evaluate(OVERFLOW)
            page.screenshot(path=screenshot_path("files-list"), full_page=True)
        finally:
            browser.close()

    assert shots == {"list": 0, "page": 0, "lines-2": 0, "files": 0}  # nothing wider than the window
    assert errors == []
    assert Batch.objects.get(pk=running.pk).status == Status.CANCELLING
