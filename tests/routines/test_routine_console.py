"""The routine's console pages: the model picked from those the owner may use, the owner shown by
name, one schedule field, the note of a routine with no model to run with (and the home's line on
the default model); runs' statuses as coloured badges, output with its line breaks, Retry of a
failed run linked both ways; events refused for their signature; the secret rotated and shown once."""

import hashlib
import hmac
import re
import time

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.test import Client

from routines.ingest import ingest
from routines.models import RefusedEvent, Routine, Run
from routines.refused_events import KEPT
from routines.routine_writes import new_token
from routines.signatures import standard_keys, standard_sign
from tests.console_html import labels, readonly, text
from tests.factories import AccountFactory, EventFactory, ModelFactory, ModelServerFactory, RoutineFactory, RunFactory

pytestmark = pytest.mark.django_db

NO_MODEL = "No model to run with: this routine names no model and no default model is set."


@pytest.fixture
def operator():
    return AccountFactory(email="op@example.test", is_staff=True, is_superuser=True)


@pytest.fixture
def console(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def served(owner):
    """srv/allowed may be used by the owner's group, srv/forbidden may not; no default."""
    server = ModelServerFactory(name="srv")
    allowed, forbidden = ModelFactory(server=server, name="allowed"), ModelFactory(server=server, name="forbidden")
    owner.group.all_models = False
    owner.group.save()
    owner.group.allowed_models.set([allowed])
    return {"allowed": allowed, "forbidden": forbidden}


@pytest.fixture
def routine(owner):
    return RoutineFactory(account=owner, name="Digest", prompt="Summarize the event.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret="s3cret-old", webhook_token=new_token())


def page_url(routine) -> str:
    return f"/admin/routines/routine/{routine.pk}/change/"


def form(routine, **changes) -> dict:
    data = {"name": routine.name, "prompt": routine.prompt, "trigger": routine.trigger, "delivery_targets_0": "inapp",
            "uses_ai": "on", "is_enabled": "on", "webhook_signature_scheme": "body", "schedule": routine.schedule,
            "timezone": routine.timezone, "model": "", "disabled_reason": "", "_save": "Save"}
    data.update(changes)
    return data


def options(page: str, name: str) -> list[tuple[str, str]]:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', page, re.S).group(1)
    return re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select)


# --- The form ----------------------------------------------------------------------------------


def test_the_model_is_picked_from_the_models_the_owner_may_use(console, routine, served):
    page = console.get(page_url(routine)).content.decode()

    assert options(page, "model") == [
        ("", "None: the default model (no default model is set, so the routine cannot run)"),
        ("srv/allowed", "srv/allowed")]
    response = console.post(page_url(routine), form(routine, model="srv/allowed"))
    assert response.status_code == 302
    assert Routine.objects.get(pk=routine.pk).model == "srv/allowed"


def test_a_model_the_owner_may_not_use_is_refused_by_the_form(console, routine, served):
    response = console.post(page_url(routine), form(routine, model="srv/forbidden"))

    assert response.status_code == 200
    assert "Select a valid choice." in response.context["adminform"].form.errors["model"][0]
    assert Routine.objects.get(pk=routine.pk).model == ""


def test_a_model_no_longer_allowed_stays_shown_marked_and_cannot_be_saved_again(console, routine, served):
    Routine.objects.filter(pk=routine.pk).update(model="srv/forbidden")

    page = console.get(page_url(routine)).content.decode()
    assert ("srv/forbidden", "srv/forbidden (not usable by this owner)") in options(page, "model")
    response = console.post(page_url(routine), form(routine, model="srv/forbidden"))
    assert response.context["adminform"].form.errors["model"] == [
        "The model 'srv/forbidden' is not allowed for your account group."]


def test_the_owner_is_shown_by_name_linked_and_not_as_an_id_to_type(console, routine, owner):
    page = console.get(page_url(routine)).content.decode()

    assert 'name="account"' not in page
    assert readonly(page)["Account"] == str(owner) == "owner@example.test"
    assert f'<a href="/admin/accounts/account/{owner.pk}/change/" class="text-link">owner@example.test</a>' in page
    # a form posting another owner's id changes nothing
    other = AccountFactory(email="other@example.test")
    console.post(page_url(routine), form(routine, account=other.pk))
    assert Routine.objects.get(pk=routine.pk).account_id == owner.pk


def test_the_schedule_is_one_field_with_its_note_under_it(console, routine):
    Routine.objects.filter(pk=routine.pk).update(trigger="schedule", schedule="")
    page = console.get(page_url(routine)).content.decode()

    assert list(labels(page).values()).count("Schedule") == 1 and "Schedule" not in readonly(page)
    assert page.index('name="schedule"') < page.index("No schedule: runs only by run-now") < page.index(
        'name="timezone"')


def test_a_routine_with_no_model_to_run_with_says_so_above_its_form(console, routine, served):
    page = console.get(page_url(routine)).content.decode()
    note = re.search(r'<div[^>]*id="routine-model-note"[^>]*>(.*?)</div>', page, re.S).group(1)
    assert note.startswith(NO_MODEL) and "Set the routine&#x27;s model" in note

    served["allowed"].is_default = True
    served["allowed"].save()
    assert 'id="routine-model-note"' not in console.get(page_url(routine)).content.decode()


def test_the_home_names_the_default_model_or_says_there_is_none(console, routine, served):
    home = console.get("/admin/").content.decode()
    line = re.search(r'<p id="home-default-model"[^>]*>(.*?)</p>', home, re.S).group(1)
    assert "No default model is set" in line
    assert re.search(r'id="home-routines-without-model" href="/admin/routines/routine/\?uses_ai__exact=1&amp;'
                     r'model__exact=">1 routine</a> has no model to run with', line)
    RoutineFactory(account=routine.account, name="Named", model="srv/allowed", webhook_token=new_token())
    listed = console.get("/admin/routines/routine/?uses_ai__exact=1&model__exact=")
    assert listed.status_code == 200 and [r.name for r in listed.context["cl"].result_list] == ["Digest"]

    served["allowed"].is_default = True
    served["allowed"].save()
    line = re.search(r'<p id="home-default-model"[^>]*>(.*?)</p>', console.get("/admin/").content.decode(),
                     re.S).group(1)
    assert "Default model: <a" in line and ">srv/allowed</a>" in line and "no model to run with" not in line


# --- Runs ----------------------------------------------------------------------------------------


def test_run_statuses_are_badges_in_the_theme_s_colours(console, routine):
    for status in ("succeeded", "failed", "running", "queued"):
        RunFactory(routine=routine, trigger="manual", status=status)
    page = console.get(page_url(routine)).content.decode()
    table = re.search(r'<table id="last-runs".*?</table>', page, re.S).group(0)

    for status, colour in (("succeeded", "bg-green-100"), ("failed", "bg-red-100"), ("running", "bg-blue-100"),
                           ("queued", "bg-orange-100")):
        badge = re.search(rf'<span class="[^"]*run-status-{status}[^"]*"', table).group(0)
        assert colour in badge
    listed = console.get("/admin/routines/run/").content.decode()
    assert all(f"run-status-{s}" in listed for s in ("succeeded", "failed", "running", "queued"))


def test_a_run_s_output_keeps_its_line_breaks(console, routine):
    run = RunFactory(routine=routine, trigger="manual", status="succeeded", output="Line one\n  indented <two>\n")
    page = console.get(f"/admin/routines/run/{run.pk}/change/").content.decode()

    assert re.search(r'<pre class="run-output"[^>]*>Line one\n  indented &lt;two&gt;\n</pre>', page)
    shown = [text(label) for label in re.findall(r"<label\b[^>]*>(.*?)</label>", page, re.S)]
    assert [label for label in shown if label in ("Status", "Output", "Error", "Retry", "Retry of")] == [
        "Status", "Retry", "Output", "Error"]  # each once


def test_a_failed_run_is_retried_with_its_event_and_the_two_are_linked(console, routine, operator,
                                                                       django_capture_on_commit_callbacks):
    event = EventFactory(routine=routine, event_id="e-7", body='{"a": 1}')
    failed = RunFactory(routine=routine, trigger="webhook", status="failed", error="503: down",
                        source_event=event, event_id="e-7")
    page = console.get(f"/admin/routines/run/{failed.pk}/change/").content.decode()
    assert re.search(rf'class="[^"]*run-retry" data-run="{failed.pk}" formaction="/admin/routines/run/{failed.pk}'
                     r'/retry/" formmethod="post"', page)

    with django_capture_on_commit_callbacks() as enqueued:
        response = console.post(f"/admin/routines/run/{failed.pk}/retry/", follow=True)

    retry = Run.objects.exclude(pk=failed.pk).get()
    assert (retry.retry_of_id, retry.source_event_id, retry.event_id, retry.trigger, retry.status) == (
        failed.pk, event.pk, "e-7", "webhook", "queued")
    assert len(enqueued) == 1
    assert response.redirect_chain == [(f"/admin/routines/run/{failed.pk}/change/", 302)]
    assert [str(m) for m in response.context["messages"]] == [
        f'Run {retry.pk} is queued: a retry of run {failed.pk}. <a href="/admin/routines/run/{retry.pk}/change/">'
        "See it</a>."]
    assert LogEntry.objects.get(object_id=str(routine.pk)).get_change_message() == (
        f"Retried run {failed.pk} as run {retry.pk}")
    retried_page = console.get(f"/admin/routines/run/{failed.pk}/change/").content.decode()
    assert f'Retried as <a class="text-primary-600 dark:text-primary-500 run-link" href="/admin/routines/run/' \
           f'{retry.pk}/change/">Run {retry.pk}</a>' in retried_page
    retry_page = console.get(f"/admin/routines/run/{retry.pk}/change/").content.decode()
    assert f'href="/admin/routines/run/{failed.pk}/change/">Run {failed.pk}</a>' in retry_page
    assert "run-retry-of" in retry_page and 'class="run-retry"' not in retry_page
    routine_page = console.get(page_url(routine)).content.decode()
    assert re.search(rf'<tr data-run="{retry.pk}".*?retry of <a[^>]*href="/admin/routines/run/{failed.pk}/change/"',
                     routine_page, re.S)


def test_the_routine_page_s_retry_comes_back_to_the_routine(console, routine):
    failed = RunFactory(routine=routine, trigger="manual", status="failed", error="503: down")
    page = console.get(page_url(routine)).content.decode()
    url = f"/admin/routines/run/{failed.pk}/retry/?next=%2Fadmin%2Froutines%2Froutine%2F{routine.pk}%2Fchange%2F"
    assert f'formaction="{url}"' in page

    response = console.post(url)

    assert response.status_code == 302 and response["Location"] == page_url(routine)
    assert Run.objects.filter(retry_of=failed).count() == 1


@pytest.mark.parametrize("status", ["succeeded", "queued", "running"])
def test_only_a_failed_run_is_retried(console, routine, status):
    run = RunFactory(routine=routine, trigger="manual", status=status)
    response = console.post(f"/admin/routines/run/{run.pk}/retry/", follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        f"Run {run.pk} has not failed ({status}): only a failed run is retried."]
    assert Run.objects.count() == 1


def test_a_paused_routine_s_run_is_not_retried(console, routine):
    run = RunFactory(routine=routine, trigger="manual", status="failed")
    Routine.objects.filter(pk=routine.pk).update(is_enabled=False)
    response = console.post(f"/admin/routines/run/{run.pk}/retry/", follow=True)
    assert [str(m) for m in response.context["messages"]] == ["The routine is paused: enable it before running it."]
    assert Run.objects.count() == 1


def test_staff_who_may_only_view_cannot_retry(routine):
    viewer = AccountFactory(email="viewer@example.test", is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_routine", "view_run"]))
    client = Client()
    client.force_login(viewer)
    run = RunFactory(routine=routine, trigger="manual", status="failed")

    assert client.post(f"/admin/routines/run/{run.pk}/retry/").status_code == 403
    assert 'class="run-retry"' not in client.get(page_url(routine)).content.decode()
    assert Run.objects.count() == 1


# --- Refused events ------------------------------------------------------------------------------


def signed(secret: str, body: bytes) -> dict:
    return {"X-Svc-Signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
            "Content-Type": "application/json"}


def test_events_refused_for_their_signature_are_shown_without_body_or_signature(console, routine):
    body = b'{"order": "secret-order-42"}'
    assert ingest(routine.webhook_token, body, {"Content-Type": "application/json"})[0] == 401
    assert ingest(routine.webhook_token, body, signed("not-the-secret", body))[0] == 401
    assert ingest(routine.webhook_token, body, signed("s3cret-old", body))[0] == 200

    rows = list(RefusedEvent.objects.order_by("id").values("reason", "signature_headers", "body_bytes",
                                                            "body_sha256", "content_type"))
    digest = hashlib.sha256(body).hexdigest()
    assert rows == [
        {"reason": "no signature header", "signature_headers": "", "body_bytes": len(body),
         "body_sha256": digest, "content_type": "application/json"},
        {"reason": "signature wrong", "signature_headers": "x-svc-signature",
         "body_bytes": len(body), "body_sha256": digest, "content_type": "application/json"}]
    page = console.get(page_url(routine)).content.decode()
    table = re.search(r'<table id="refused-events".*?</table>', page, re.S).group(0)
    assert table.count('refused-event"') == 2
    assert "signature wrong" in table and "no signature header" in table and digest[:16] in table
    assert "secret-order-42" not in page and "s3cret-old" not in page
    assert signed("not-the-secret", body)["X-Svc-Signature"] not in page


def test_a_standard_webhooks_delivery_signed_too_long_ago_is_shown_as_such(routine):
    Routine.objects.filter(pk=routine.pk).update(webhook_signature_scheme="standard")
    stale = int(time.time()) - 3600
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(stale),
               "webhook-signature": standard_sign(standard_keys("s3cret-old")[0], "msg_1", stale, b"{}")}

    assert ingest(routine.webhook_token, b"{}", headers)[0] == 401

    row = RefusedEvent.objects.get()
    assert (row.reason, row.signature_headers) == ("timestamp too far from the server's clock",
                                                   "webhook-id, webhook-timestamp, webhook-signature")


def test_only_the_newest_refused_events_are_kept(routine):
    for i in range(KEPT + 5):
        ingest(routine.webhook_token, f'{{"n": {i}}}'.encode(), {})
    kept = list(RefusedEvent.objects.filter(routine=routine).order_by("id").values_list("body_bytes", flat=True))
    assert len(kept) == KEPT
    assert kept[-1] == len(f'{{"n": {KEPT + 4}}}')


def test_a_routine_without_refusals_says_none(console, routine):
    assert "None refused." in readonly(console.get(page_url(routine)).content.decode())["Refused events"]


# --- The secret ----------------------------------------------------------------------------------


def test_the_secret_is_rotated_shown_once_and_the_old_one_refused(console, routine):
    page = console.get(page_url(routine)).content.decode()
    assert f'id="secret-rotate" href="/admin/routines/routine/{routine.pk}/secret/rotate/"' in page
    assert "s3cret-old" not in page
    question = console.get(f"/admin/routines/routine/{routine.pk}/secret/rotate/").content.decode()
    assert "The current secret stops working at once" in question
    assert Routine.objects.get(pk=routine.pk).webhook_secret == "s3cret-old"  # a GET changes nothing

    response = console.post(f"/admin/routines/routine/{routine.pk}/secret/rotate/confirm/")

    assert response.status_code == 200 and "no-store" in response["Cache-Control"].split(", ")
    secret = re.search(r'id="webhook-secret" value="([0-9a-f]{64})"', response.content.decode()).group(1)
    assert Routine.objects.get(pk=routine.pk).webhook_secret == secret
    body = b'{"n": 1}'
    assert ingest(routine.webhook_token, body, signed("s3cret-old", body))[0] == 401
    assert ingest(routine.webhook_token, body, signed(secret, body))[0] == 200
    assert secret not in console.get(page_url(routine)).content.decode()  # shown once
    entry = LogEntry.objects.get(object_id=str(routine.pk))
    assert entry.get_change_message() == "Rotated the webhook secret" and secret not in str(entry.change_message)


def test_an_unsigned_webhook_gets_a_secret_from_the_same_button(console, routine):
    Routine.objects.filter(pk=routine.pk).update(webhook_secret=None)
    page = console.get(page_url(routine)).content.decode()
    assert "Unsigned: anyone who knows the URL can start the routine." in page and ">Add a secret</a>" in page

    console.post(f"/admin/routines/routine/{routine.pk}/secret/rotate/confirm/")

    assert re.fullmatch(r"[0-9a-f]{64}", Routine.objects.get(pk=routine.pk).webhook_secret)
    assert ingest(routine.webhook_token, b"{}", {})[0] == 401


def test_staff_who_may_only_view_cannot_rotate(routine):
    viewer = AccountFactory(email="viewer@example.test", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_routine"))
    client = Client()
    client.force_login(viewer)

    assert client.post(f"/admin/routines/routine/{routine.pk}/secret/rotate/confirm/").status_code == 403
    assert 'id="secret-rotate"' not in client.get(page_url(routine)).content.decode()
    assert Routine.objects.get(pk=routine.pk).webhook_secret == "s3cret-old"
