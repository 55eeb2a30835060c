"""The console's Batches page: every account's batches (the operator's console shows another account's as any),
their status coloured, their progress (lines ended of all) drawn as the theme's bar, their counts read for a page in
one query; filtered by status and kind, searched by id or e-mail. A batch's page is read only: its fields, counts,
files linked to the Files page, and its lines' outcomes 100 a page. Cancel (the page's button, the list's action)
moves a batch validating or in progress to cancelling and says what happened; staff need the model's permissions."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches.models import Batch, BatchLine
from tests.console_html import list_headers, list_rows, readonly, section_titles, submit_buttons, text
from tests.factories import AccountFactory, BatchFactory, BatchLineFactory, StoredFileFactory

pytestmark = pytest.mark.django_db

LIST = "/admin/batches/batch/"
CREATED = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
Status, Line = Batch.Status, BatchLine.Status


@pytest.fixture
def console(client):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))
    return client


def lines(batch: Batch, *statuses: tuple[str, int], start: int = 0) -> None:
    """`(status, how many)` lines of `batch`, in that order from index `start`; an ended line has its status code
    and end time."""
    rows, index = [], start
    for status, many in statuses:
        for _ in range(many):
            ended = status in BatchLine.ENDED
            code = {Line.SUCCEEDED: 200, Line.ERRORED: 400}.get(status)
            rows.append(BatchLineFactory.build(batch=batch, index=index, custom_id=f"req-{index}", status=status,
                                               status_code=code,
                                               ended_at=CREATED + timedelta(minutes=index) if ended else None))
            index += 1
    BatchLine.objects.bulk_create(rows)


def page_of(batch: Batch) -> str:
    return f"{LIST}{quote(batch.pk)}/change/"  # the admin's quoting of an id: batch_5F… for batch_…


def line_rows(page: str) -> list[dict[str, str]]:
    """The lines' table on a batch's page: each row's cells by field."""
    table = re.search(r'<table id="lines-data".*?</table>', page, re.S).group(0)
    return [{name: text(cell) for name, cell in re.findall(
        r'<td class="[^"]*?\bfield-(\w+)\b[^"]*"[^>]*>(.*?)</td>', row, re.S)}
        for row in re.findall(r'<tr class="form-row\b.*?</tr>', table, re.S)]


@pytest.fixture
def batches():
    ana, bob = AccountFactory(email="ana@example.test"), AccountFactory(email="bob@example.test")
    running = BatchFactory(id="batch_" + "a" * 24, account=ana, status=Status.IN_PROGRESS, created_at=CREATED)
    lines(running, (Line.SUCCEEDED, 6), (Line.ERRORED, 1), (Line.RUNNING, 1), (Line.QUEUED, 2))
    done = BatchFactory(id="msgbatch_" + "b" * 24, account=bob, kind=Batch.Kind.ANTHROPIC, endpoint="/v1/messages",
                        status=Status.COMPLETED, created_at=CREATED + timedelta(hours=1))
    lines(done, (Line.SUCCEEDED, 3), (Line.CANCELLED, 1))
    new = BatchFactory(id="batch_" + "c" * 24, account=bob, status=Status.VALIDATING,
                       created_at=CREATED + timedelta(hours=2))
    return {"running": running, "done": done, "new": new}


# --- The list ------------------------------------------------------------------------------------


def test_the_list_shows_every_accounts_batches_with_status_progress_and_counts(console, batches):
    raw = console.get(LIST).content.decode()
    assert "/<wbr>v1/<wbr>chat/<wbr>completions" in raw  # a narrow column breaks an endpoint after a slash only
    page = raw.replace("<wbr>", "")

    assert list_headers(page) == ["batch_and_account", "endpoint_and_kind", "status_label", "progress", "outcomes",
                                  "created", "expires"]
    assert list_rows(page) == [
        {"batch_and_account": "batch_" + "c" * 24 + " bob@example.test",
         "endpoint_and_kind": "/v1/chat/completions OpenAI batch", "status_label": "Validating",
         "progress": "No lines yet", "outcomes": "0 / 0", "created": "11:30:00 2026-11-20",
         "expires": "11:30:00 2026-11-21"},
        {"batch_and_account": "msgbatch_" + "b" * 24 + " bob@example.test",
         "endpoint_and_kind": "/v1/messages Anthropic message batch", "status_label": "Completed",
         "progress": "4 / 4", "outcomes": "3 / 0", "created": "10:30:00 2026-11-20", "expires": "10:30:00 2026-11-21"},
        {"batch_and_account": "batch_" + "a" * 24 + " ana@example.test",
         "endpoint_and_kind": "/v1/chat/completions OpenAI batch", "status_label": "In Progress",
         "progress": "7 / 10", "outcomes": "6 / 1", "created": "09:30:00 2026-11-20", "expires": "09:30:00 2026-11-21"},
    ]
    # the theme's bar, as wide as the share of lines ended; the status in the theme's colours, as a run's
    assert re.search(r'data-ended="7" data-total="10".*?title="Ended: 70%" style="width: 70%"', page, re.S)
    assert re.search(r'data-ended="4" data-total="4".*?style="width: 100%"', page, re.S)
    assert re.search(r'class="[^"]*bg-blue-100[^"]*batch-status batch-status-in_progress"', page)
    assert re.search(r'class="[^"]*bg-green-100[^"]*batch-status batch-status-completed"', page)
    assert re.search(r'class="[^"]*bg-orange-100[^"]*batch-status batch-status-validating"', page)
    assert 'href="/admin/batches/batch/add/"' not in page


def test_a_page_of_the_list_reads_its_counts_in_one_query_whatever_its_length(console, batches):
    def queries() -> list[str]:
        with CaptureQueriesContext(connection) as captured:
            assert console.get(LIST).status_code == 200
        return [q["sql"] for q in captured.captured_queries]

    few = queries()
    for n in range(5):
        lines(BatchFactory(status=Status.IN_PROGRESS), (Line.SUCCEEDED, 2), (Line.QUEUED, 1))
    many = queries()

    assert len(many) == len(few)
    assert len([sql for sql in many if 'FROM "batches_batchline"' in sql]) == 1


def test_the_list_is_filtered_by_status_and_kind_and_searched_by_id_or_email(console, batches):
    def ids(query: str) -> list[str]:
        return [row["batch_and_account"].split()[0] for row in list_rows(console.get(LIST + query).content.decode())]

    assert ids("?status__exact=completed") == [batches["done"].id]
    assert ids("?status__exact=in_progress") == [batches["running"].id]
    assert ids("?kind__exact=anthropic") == [batches["done"].id]
    assert ids("?kind__exact=openai") == [batches["new"].id, batches["running"].id]
    assert ids(f"?q={batches['running'].id}") == [batches["running"].id]
    assert ids("?q=batch_aaaa") == []  # an id is looked up whole
    assert ids("?q=bob@") == [batches["new"].id, batches["done"].id]


# --- A batch's page ------------------------------------------------------------------------------


def test_a_batchs_page_shows_its_fields_counts_and_files_read_only(console):
    owner = AccountFactory(email="ana@example.test")
    given = StoredFileFactory(id="file-" + "1" * 24, account=owner, filename="input.jsonl")
    output = StoredFileFactory(id="file-" + "2" * 24, account=owner, filename="batch_x_output.jsonl",
                               purpose="batch_output")
    error = StoredFileFactory(id="file-" + "3" * 24, account=owner, filename="batch_x_error.jsonl",
                              purpose="batch_output")
    batch = BatchFactory(id="batch_" + "d" * 24, account=owner, status=Status.COMPLETED, created_at=CREATED,
                         input_file=given, input_file_name=given.id, output_file=output, error_file=error,
                         metadata={"job": "nightly"},
                         in_progress_at=CREATED + timedelta(minutes=1), completed_at=CREATED + timedelta(minutes=9))
    lines(batch, (Line.SUCCEEDED, 2), (Line.EXPIRED, 1))

    page = console.get(page_of(batch)).content.decode()

    shown = readonly(page)
    assert {name: shown[name] for name in (
        "Id", "Account", "Kind", "Endpoint", "Status", "Progress", "Lines", "Request counts (as its API reports them)",
        "Created at", "Expires at", "Metadata", "Input file", "Output file", "Error file", "In progress at",
        "Completed at", "Cancelled at")} == {
        "Id": batch.id, "Account": "ana@example.test", "Kind": "OpenAI batch", "Endpoint": "/v1/chat/completions",
        "Status": "Completed", "Progress": "3 / 3",
        "Lines": "3 lines: 2 succeeded, 0 errored, 0 cancelled, 1 expired; 0 queued, 0 running.",
        "Request counts (as its API reports them)": "total 3, completed 2, failed 1",
        "Created at": "2026-11-20 09:30:00 UTC", "Expires at": "2026-11-21 09:30:00 UTC",
        "Metadata": '{ "job" : "nightly" }', "Input file": f"input.jsonl {given.id}",
        "Output file": f"batch_x_output.jsonl {output.id}", "Error file": f"batch_x_error.jsonl {error.id}",
        "In progress at": "2026-11-20 09:31:00 UTC", "Completed at": "2026-11-20 09:39:00 UTC", "Cancelled at": "-"}
    assert f'href="/admin/gateway/storedfile/{given.id}/change/">input.jsonl</a>' in page
    assert f'href="/admin/gateway/storedfile/{output.id}/change/">batch_x_output.jsonl</a>' in page
    assert section_titles(page)[:4] == ["Files", "Times", "Running", "Lines"]
    assert submit_buttons(page) == set() and "batch-cancel" not in page  # ended: nothing to save or cancel
    assert 'name="endpoint"' not in page and 'name="lines-0-custom_id"' not in page


def test_a_deleted_input_file_keeps_its_id_and_a_failed_batch_shows_its_errors(console):
    batch = BatchFactory(status=Status.FAILED, input_file_name="file-" + "9" * 24, errors={"object": "list", "data": [
        {"code": "invalid_json_line", "message": "This line is not a JSON object.", "param": None, "line": 2}]})

    page = console.get(page_of(batch)).content.decode()
    shown = readonly(page)

    assert section_titles(page)[:5] == ["Why it failed", "Files", "Times", "Running", "Lines"]
    assert shown["Input file"] == "file-" + "9" * 24 + " (deleted)"
    assert shown["Errors"] == "line 2: This line is not a JSON object. (invalid_json_line)"
    assert shown["Progress"] == "No lines yet"
    assert (shown["Output file"], shown["Error file"]) == ("None: no line succeeded", "None: no line failed")


def test_a_running_batch_has_no_files_yet_and_an_ended_one_says_when_its_file_went(console):
    running = BatchFactory(status=Status.IN_PROGRESS)
    shown = readonly(console.get(page_of(running)).content.decode())
    assert shown["Output file"] == shown["Error file"] == "None yet: written when it ends"

    swept = BatchFactory(status=Status.COMPLETED)  # its output file expired and was swept: the link is emptied
    lines(swept, (Line.SUCCEEDED, 1), (Line.ERRORED, 1))
    shown = readonly(console.get(page_of(swept)).content.decode())
    assert shown["Output file"] == shown["Error file"] == "Gone: expired or deleted"


def test_an_anthropic_batch_names_where_its_requests_came_from(console):
    batch = BatchFactory(kind=Batch.Kind.ANTHROPIC, endpoint="/v1/messages", status=Status.IN_PROGRESS)
    lines(batch, (Line.SUCCEEDED, 1), (Line.ERRORED, 1), (Line.QUEUED, 1))
    page = console.get(page_of(batch)).content.decode()

    shown = readonly(page)
    assert shown["Input file"] == "None: the requests came in the body"
    assert shown["Output file"] == shown["Error file"] == (
        f"None: its results are read from GET /v1/messages/batches/{batch.id}/results")
    assert shown["Request counts (as its API reports them)"] == (
        "processing 1, succeeded 1, errored 1, canceled 0, expired 0")
    assert f"POST /v1/messages/batches/{batch.id}/cancel" in text(page)


def test_the_lines_outcomes_are_shown_100_a_page_in_input_order(console):
    batch = BatchFactory(status=Status.IN_PROGRESS)
    lines(batch, (Line.SUCCEEDED, 120), (Line.ERRORED, 5), (Line.QUEUED, 125))

    first = line_rows(console.get(page_of(batch)).content.decode())
    third = line_rows(console.get(page_of(batch) + "?lines-page=3").content.decode())

    assert len(first) == 100 and len(third) == 50
    assert first[0] == {"index": "0", "custom_id": "req-0", "outcome": "Succeeded", "status_code": "200",
                        "ended_at": "2026-11-20 09:30:00 UTC"}
    assert third[0] == {"index": "200", "custom_id": "req-200", "outcome": "Queued", "status_code": "-",
                        "ended_at": "-"}
    assert [row["index"] for row in third] == [str(n) for n in range(200, 250)]
    second = line_rows(console.get(page_of(batch) + "?lines-page=2").content.decode())
    assert [row["outcome"] for row in second[20:26]] == ["Errored"] * 5 + ["Queued"]
    assert second[20]["status_code"] == "400"


# --- Cancel --------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [Status.VALIDATING, Status.IN_PROGRESS])
def test_the_pages_cancel_moves_a_batch_to_cancelling_and_says_so(console, status):
    batch = BatchFactory(status=status)
    page = console.get(page_of(batch)).content.decode()
    assert f'formaction="/admin/batches/batch/{quote(batch.id)}/cancel/"' in page

    response = console.post(f"{LIST}{batch.id}/cancel/", follow=True)

    assert response.redirect_chain == [(page_of(batch), 302)]
    assert [str(m) for m in response.context["messages"]] == [
        f"Batch {batch.id} is cancelling: the lines running now end (and are billed), the others are cancelled."]
    batch.refresh_from_db()
    assert batch.status == Status.CANCELLING and batch.cancelling_at is not None
    assert "batch-cancel" not in response.content.decode()  # asked already: no second button
    assert LogEntry.objects.get(object_id=batch.id).change_message == "Cancelled"


@pytest.mark.parametrize(("status", "message"), [
    (Status.COMPLETED, "has already ended (completed): nothing to cancel."),
    (Status.CANCELLED, "has already ended (cancelled): nothing to cancel."),
    (Status.CANCELLING, "is already being cancelled."),
    (Status.FINALIZING, "is finalizing: every line has ended, none is left to cancel."),
])
def test_a_batch_that_cannot_be_cancelled_has_no_button_and_is_left_as_it_was(console, status, message):
    batch = BatchFactory(status=status)
    assert "batch-cancel" not in console.get(page_of(batch)).content.decode()

    response = console.post(f"{LIST}{batch.id}/cancel/", follow=True)

    assert [str(m) for m in response.context["messages"]] == [f"Batch {batch.id} {message}"]
    batch.refresh_from_db()
    assert batch.status == status and batch.cancelling_at is None and not LogEntry.objects.exists()


def test_the_lists_cancel_action_cancels_what_it_can_and_names_the_rest(console, batches):
    chosen = [batches["running"].id, batches["done"].id, batches["new"].id]

    response = console.post(LIST, {"action": "cancel_batches", "_selected_action": chosen}, follow=True)

    assert [str(m) for m in response.context["messages"]] == [
        f"2 batch(es) cancelling: {batches['running'].id}, {batches['new'].id}. The lines running now end (and are "
        "billed), the others are cancelled.",
        f"1 batch(es) left as they were (only a batch validating or in progress is cancelled): {batches['done'].id} "
        "(completed)."]
    assert dict(Batch.objects.values_list("id", "status")) == {
        batches["running"].id: Status.CANCELLING, batches["new"].id: Status.CANCELLING,
        batches["done"].id: Status.COMPLETED}


def test_an_unknown_batch_is_a_404_and_cancel_takes_only_a_post(console):
    assert console.post(f"{LIST}batch_{'0' * 24}/cancel/").status_code == 404
    batch = BatchFactory(status=Status.IN_PROGRESS)
    assert console.get(f"{LIST}{batch.id}/cancel/").status_code == 405
    assert Batch.objects.get(pk=batch.pk).status == Status.IN_PROGRESS


# --- Permissions ---------------------------------------------------------------------------------


def test_staff_need_the_permission_to_view_batches_and_to_change_them_to_cancel(batches):
    staff = AccountFactory(email="staff@example.test", is_staff=True)
    client = Client()
    client.force_login(staff)
    running = batches["running"]
    assert client.get(LIST).status_code == 403
    assert client.get(page_of(running)).status_code == 403

    staff.user_permissions.add(Permission.objects.get(codename="view_batch"))
    listed = client.get(LIST).content.decode()
    assert [row["batch_and_account"].split()[0] for row in list_rows(listed)] == [
        batches["new"].id, batches["done"].id, running.id]
    assert 'value="cancel_batches"' not in listed
    page = client.get(page_of(running)).content.decode()
    assert "batch-cancel" not in page and len(line_rows(page)) == 10  # the lines come with the batch
    assert client.post(f"{LIST}{running.id}/cancel/").status_code == 403
    client.post(LIST, {"action": "cancel_batches", "_selected_action": [running.id]})
    assert Batch.objects.get(pk=running.pk).status == Status.IN_PROGRESS

    staff.user_permissions.add(Permission.objects.get(codename="change_batch"))
    assert 'value="cancel_batches"' in client.get(LIST).content.decode()
    assert client.post(f"{LIST}{running.id}/cancel/").status_code == 302
    assert Batch.objects.get(pk=running.pk).status == Status.CANCELLING
    assert timezone.now() - Batch.objects.get(pk=running.pk).cancelling_at < timedelta(minutes=1)
