"""A routine's console page. Delivery targets as rows, checked as the API checks them;
the webhook URL masked with Copy and Show (the whole URL only from a POST for staff who may change
the routine); Run now through the API's own service; the last runs; an event's payload as pretty,
escaped JSON; events named for what they are."""

import json
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.test import Client

from routines.models import Event, Routine, Run
from routines.routine_writes import new_token
from tests.factories import (
    AccountFactory,
    EventFactory,
    LinkedChannelFactory,
    RoutineFactory,
    RunFactory,
    api_key_for,
    bearer,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return AccountFactory(email="op@example.test", is_staff=True, is_superuser=True)


@pytest.fixture
def console(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def routine(owner):
    return RoutineFactory(account=owner, name="Digest", prompt="Summarize the event.", trigger="webhook",
                          delivery_targets=["inapp", "email:olive@example.test"], webhook_secret=None,
                          webhook_token=new_token())


def page_url(routine) -> str:
    return f"/admin/routines/routine/{routine.pk}/change/"


def form(routine, targets, **changes) -> dict:
    data = {"account": routine.account_id, "name": routine.name, "prompt": routine.prompt,
            "trigger": routine.trigger, "uses_ai": "on", "is_enabled": "on", "webhook_signature_scheme": "body",
            "schedule": routine.schedule, "timezone": routine.timezone, "model": "", "disabled_reason": "",
            "_save": "Save"}
    data.update({f"delivery_targets_{i}": target for i, target in enumerate(targets)})
    data.update(changes)
    return data


# --- Delivery targets -------------------------------------------------------------------------


def test_the_targets_are_rows_of_one_target_each(console, routine):
    page = console.get(page_url(routine)).content.decode()
    values = [re.search(rf'name="delivery_targets_{i}"[^>]*', page).group(0) for i in range(5)]
    assert 'value="inapp"' in values[0] and 'value="email:olive@example.test"' in values[1]
    assert all("value=" not in row for row in values[2:])  # three empty rows, up to the API's five
    assert 'name="delivery_targets_5"' not in page


def test_rows_are_saved_as_the_list_of_targets_empty_rows_left_out(console, routine):
    response = console.post(page_url(routine), form(routine, ["", " webhook:https://hooks.example.test/a ", "",
                                                              "inapp", ""]))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Routine.objects.get(pk=routine.pk).delivery_targets == ["webhook:https://hooks.example.test/a", "inapp"]


@pytest.mark.parametrize(("targets", "message"), [
    ([], "Give between 1 and 5 delivery targets; got 0."),
    (["sms:123"], "Target 1: &#x27;sms:123&#x27; is not a delivery target"),
    (["inapp", "webhook:http://plain.example.test"], "Target 2: a webhook target must be an https:// URL."),
    (["inapp", "inapp"], "Target 2 repeats an earlier target."),
    (["telegram"], "Target 1: link and verify a Telegram chat before delivering to it."),
])
def test_rows_are_checked_as_the_api_checks_them(console, routine, targets, message):
    response = console.post(page_url(routine), form(routine, targets))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert Routine.objects.get(pk=routine.pk).delivery_targets == ["inapp", "email:olive@example.test"]


def test_a_linked_channel_of_the_owner_may_be_a_target(console, routine, owner):
    from django.utils import timezone

    LinkedChannelFactory(account=owner, kind="telegram", address="12345", verified_at=timezone.now())
    assert console.post(page_url(routine), form(routine, ["telegram"])).status_code == 302
    assert Routine.objects.get(pk=routine.pk).delivery_targets == ["telegram"]


# --- The webhook URL ----------------------------------------------------------------------------


def test_the_page_shows_the_webhook_url_masked_and_never_the_token(console, routine):
    page = console.get(page_url(routine)).content.decode()
    masked = f"http://testserver/api/v1/hooks/{routine.webhook_token[:6]}" + "•" * 12
    assert re.search(r'<code class="webhook-url-text[^"]*">' + re.escape(masked) + "</code>", page)
    assert routine.webhook_token not in page and routine.webhook_token[6:18] not in page
    assert f'data-webhook-url="/admin/routines/routine/{routine.pk}/webhook-url/"' in page
    assert "webhook-url-copy" in page and "webhook-url-show" in page
    assert "routines/webhook_url.js" in page


def test_the_whole_url_comes_from_a_post_with_csrf(operator, routine, settings):
    settings.PUBLIC_BASE_URL = "https://gw.example.test"
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    url = f"/admin/routines/routine/{routine.pk}/webhook-url/"
    page = client.get(page_url(routine)).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)

    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 403  # no CSRF token
    answer = client.post(url, headers={"X-CSRFToken": token})

    assert answer.status_code == 200 and "no-store" in answer["Cache-Control"]
    assert answer.json() == {"url": f"https://gw.example.test/api/v1/hooks/{routine.webhook_token}"}


def test_staff_who_may_only_view_get_the_masked_url_without_buttons(client, routine):
    viewer = AccountFactory(email="viewer@example.test", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_routine"))
    client.force_login(viewer)
    page = client.get(page_url(routine)).content.decode()
    assert routine.webhook_token[:6] in page and routine.webhook_token not in page
    assert "webhook-url-copy" not in page and 'id="run-now"' not in page
    assert client.post(f"/admin/routines/routine/{routine.pk}/webhook-url/").status_code == 403
    assert client.post(f"/admin/routines/routine/{routine.pk}/run-now/").status_code == 403
    assert not Run.objects.exists()


# --- Run now ----------------------------------------------------------------------------------


def test_run_now_queues_a_run_through_the_api_service(console, routine, owner, django_capture_on_commit_callbacks):
    page = console.get(page_url(routine)).content.decode()
    assert re.search(rf'id="run-now" formaction="/admin/routines/routine/{routine.pk}/run-now/" formmethod="post"',
                     page)
    with django_capture_on_commit_callbacks() as enqueued:
        response = console.post(f"/admin/routines/routine/{routine.pk}/run-now/", follow=True)

    run = Run.objects.get(routine=routine)
    assert (run.trigger, run.status) == ("manual", "queued")
    assert len(enqueued) == 1  # its task, once committed
    assert response.redirect_chain == [(page_url(routine), 302)]
    [message] = [str(m) for m in response.context["messages"]]
    assert message == f'Run {run.pk} of Digest is queued: <a href="/admin/routines/run/{run.pk}/change/">see it</a>.'
    assert LogEntry.objects.get(object_id=str(routine.pk)).get_change_message() == f"Started run {run.pk} now"
    # the API sees it
    runs = console.get(f"/api/v1/routines/{routine.pk}/runs", headers=bearer(api_key_for(owner))).json()["runs"]
    assert [(r["id"], r["trigger"], r["status"]) for r in runs] == [(run.pk, "manual", "queued")]


def test_run_now_refuses_a_paused_routine_in_the_api_s_words(console, routine):
    Routine.objects.filter(pk=routine.pk).update(is_enabled=False)
    response = console.post(f"/admin/routines/routine/{routine.pk}/run-now/", follow=True)
    assert [str(m) for m in response.context["messages"]] == ["The routine is paused: enable it before running it."]
    assert not Run.objects.exists() and not LogEntry.objects.exists()


# --- The last runs, the runs and the events ------------------------------------------------------


def test_the_page_lists_the_last_runs_with_their_model_and_error(console, routine):
    RoutineFactory(account=routine.account, name="Other")
    ok = RunFactory(routine=routine, trigger="webhook", status="succeeded", model="oa/echo-1")
    failed = RunFactory(routine=routine, trigger="manual", status="failed", model="oa/echo-1",
                        error="503: No model of the chain answered (oa/echo-1: 503 <b>down</b>).")
    page = console.get(page_url(routine)).content.decode()
    table = re.search(r'<table id="last-runs"[^>]*>.*?</table>', page, re.S).group(0)
    rows = re.findall(r'<tr data-run="(\d+)"', table)
    assert rows == [str(failed.pk), str(ok.pk)]  # newest first
    assert f'href="/admin/routines/run/{failed.pk}/change/">Run {failed.pk}</a>' in table
    assert "oa/echo-1: 503 &lt;b&gt;down&lt;/b&gt;" in table and "<b>down</b>" not in table
    assert f'href="/admin/routines/run/?routine__id__exact={routine.pk}">All 2 run(s) of this routine</a>' in page
    listed = console.get(f"/admin/routines/run/?routine__id__exact={routine.pk}")
    assert listed.status_code == 200 and listed.content.decode().count('name="_selected_action"') == 2


def test_a_run_page_shows_its_event_payload_pretty_and_escaped(console, routine):
    event = EventFactory(routine=routine, event_id="evt-42", content_type="application/json",
                         body=json.dumps({"text": "<script>alert(1)</script>", "n": [1, 2]}))
    run = RunFactory(routine=routine, trigger="webhook", source_event=event, event_id="evt-42")
    page = console.get(f"/admin/routines/run/{run.pk}/change/").content.decode()
    payload = re.search(r'<pre class="event-payload"[^>]*>(.*?)</pre>', page, re.S).group(1)
    assert payload == ('{\n  &quot;text&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;,\n'
                       '  &quot;n&quot;: [\n    1,\n    2\n  ]\n}')
    assert "<script>alert(1)" not in page
    assert "Event evt-42 for Digest" in page  # the run's event, by its name


def test_events_are_named_for_what_they_are_and_read_only(console, routine):
    event = EventFactory(routine=routine, event_id="evt-7", body="plain <text>")
    assert str(event) == "Event evt-7 for Digest"
    listing = console.get("/admin/routines/event/").content.decode()
    assert "Event evt-7 for Digest" in listing and "Event object" not in listing
    page = console.get(f"/admin/routines/event/{event.pk}/change/").content.decode()
    assert re.search(r'<pre class="event-payload"[^>]*>plain &lt;text&gt;</pre>', page)
    assert console.post(f"/admin/routines/event/{event.pk}/change/", {"body": "x"}).status_code == 403
    assert Event.objects.get(pk=event.pk).body == "plain <text>"


def test_a_run_of_no_event_says_so(console, routine):
    run = RunFactory(routine=routine, trigger="manual")
    page = console.get(f"/admin/routines/run/{run.pk}/change/").content.decode()
    assert "No event: started by its schedule, by run-now or by the agent." in page
