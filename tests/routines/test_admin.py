"""The console's routine pages: runs named for what they are and shown read-only, and the routine
form holding a routine to the API's schedule rules (a schedule that is given must be valid; none is
allowed, and the list and the page say that such a routine runs only by run-now)."""

import pytest

from routines.models import Routine, Run
from routines.records import NO_SCHEDULE
from routines.routine_writes import new_token
from tests.console_html import list_headers, list_rows, readonly, submit_buttons, title
from tests.factories import DeliveryFactory, LinkedChannelFactory, RoutineFactory, RunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def routine(owner):
    return RoutineFactory(account=owner, name="Digest", prompt="Summarize the event.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=None, webhook_token=new_token())


def routine_form(routine, **changes) -> dict:
    data = {"account": routine.account_id, "name": routine.name, "prompt": routine.prompt,
            "trigger": routine.trigger, "delivery_targets_0": "inapp", "uses_ai": "on", "is_enabled": "on",
            "webhook_signature_scheme": "body", "schedule": routine.schedule, "timezone": routine.timezone,
            "model": "", "disabled_reason": "", "_save": "Save"}
    data.update(changes)
    return data


def test_it_names_a_run_by_its_number_routine_and_status(routine, admin_client):
    run = RunFactory(routine=routine, trigger="manual", status="failed")
    assert str(run) == f"Run {run.pk} of Digest (failed)"
    page = admin_client.get(f"/admin/routines/run/{run.pk}/change/").content.decode()
    assert title(page).startswith(f"Run {run.pk} of Digest (failed) |")
    assert "Run object" not in page
    assert "Run object" not in admin_client.get("/admin/routines/run/").content.decode()


def test_a_run_page_has_no_save_buttons_but_can_still_be_deleted(routine, admin_client):
    run = RunFactory(routine=routine, trigger="manual", status="succeeded", output="done")
    DeliveryFactory(run=run, target="inapp", status="succeeded", attempts=1)
    page = admin_client.get(f"/admin/routines/run/{run.pk}/change/").content.decode()
    assert submit_buttons(page) == set()
    assert f'href="/admin/routines/run/{run.pk}/delete/"' in page
    assert "inapp" in page  # the deliveries are still shown
    refused = admin_client.post(f"/admin/routines/run/{run.pk}/change/", {"output": "changed", "_save": "Save"})
    assert refused.status_code == 403
    assert Run.objects.get(pk=run.pk).output == "done"


def test_a_linked_channel_page_has_no_save_buttons(owner, admin_client):
    channel = LinkedChannelFactory(account=owner, kind="telegram", address="12345")
    page = admin_client.get(f"/admin/routines/linkedchannel/{channel.pk}/change/").content.decode()
    assert submit_buttons(page) == set()
    assert f'href="/admin/routines/linkedchannel/{channel.pk}/delete/"' in page


def test_the_routine_form_takes_a_schedule_routine_without_a_schedule_and_the_page_says_so(routine, admin_client):
    url = f"/admin/routines/routine/{routine.pk}/change/"
    r = admin_client.post(url, routine_form(routine, trigger="schedule", schedule=" "))
    assert r.status_code == 302, r.content.decode()
    saved = Routine.objects.get(pk=routine.pk)
    assert (saved.trigger, saved.schedule, saved.next_run_at) == ("schedule", "", None)
    page = admin_client.get(url).content.decode()
    assert "Schedule" not in readonly(page)  # said once: under the schedule field itself
    assert page.index('name="schedule"') < page.index(NO_SCHEDULE) < page.index('name="timezone"')


def test_the_routine_list_says_which_routines_run_only_by_run_now(routine, owner, admin_client):
    RoutineFactory(account=owner, name="Unscheduled", trigger="schedule", schedule="", delivery_targets=["inapp"])
    RoutineFactory(account=owner, name="Morning", trigger="schedule", schedule="0 8 * * *",
                   timezone="Europe/Lisbon", delivery_targets=["inapp"])
    page = admin_client.get("/admin/routines/routine/").content.decode()
    assert "schedule_state" in list_headers(page)
    cells = {row["name"]: row["schedule_state"] for row in list_rows(page)}
    assert cells == {"Digest": "None needed (webhook trigger)", "Unscheduled": NO_SCHEDULE,
                     "Morning": "0 8 * * * (Europe/Lisbon)"}


def test_the_routine_form_still_refuses_an_invalid_schedule_or_zone(routine, admin_client):
    url = f"/admin/routines/routine/{routine.pk}/change/"
    r = admin_client.post(url, routine_form(routine, trigger="schedule", schedule="every day"))
    assert r.status_code == 200 and "exactly 5 fields" in r.content.decode()
    r = admin_client.post(url, routine_form(routine, trigger="schedule", schedule="0 8 * * *", timezone="Mars/Base"))
    assert r.status_code == 200 and "not a known IANA time zone" in r.content.decode()
    r = admin_client.post(url, routine_form(routine, trigger="schedule", schedule="", timezone="Mars/Base"))
    assert r.status_code == 200 and "not a known IANA time zone" in r.content.decode()
    assert Routine.objects.get(pk=routine.pk).trigger == "webhook"


def test_the_routine_form_takes_a_schedule_and_moves_the_next_run(routine, admin_client):
    url = f"/admin/routines/routine/{routine.pk}/change/"
    r = admin_client.post(url, routine_form(routine, trigger="schedule", schedule=" 30  8 * * 1-5 "))
    assert r.status_code == 302, r.content.decode()
    saved = Routine.objects.get(pk=routine.pk)
    assert (saved.trigger, saved.schedule) == ("schedule", "30 8 * * 1-5")
    assert saved.next_run_at is not None and (saved.next_run_at.hour, saved.next_run_at.minute) == (8, 30)

    r = admin_client.post(url, routine_form(saved, trigger="webhook", schedule=""))  # other triggers need none
    assert r.status_code == 302
    assert Routine.objects.get(pk=routine.pk).next_run_at is None
