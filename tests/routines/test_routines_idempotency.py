"""`Idempotency-Key` on POST /api/v1/routines and POST /api/v1/routines/{id}/run-now
(accounts/idempotency.py), through the test client: a retry with the key gets the first answer and
creates or queues nothing more; another body is a 422, a request still being answered a 409, a bad key
a 422 naming the header, all in the native shapes; the key is the account's, whichever credential sends
it; expired answers are swept, and an expired key runs anew."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.tasks import sweep_idempotent_requests
from gateway.celery import app as celery_app
from gateway.models import IdempotentRequest
from routines.models import Routine, Run
from tests.contract import assert_detail
from tests.factories import IdempotentRequestFactory, RoutineFactory, api_key_for, bearer, session_for
from tests.routines.routines_api_support import ROUTINES, assert_validation, minimal

KEY = "create-digest-7d1c"


def post(client, token, path, body, key=KEY, **headers):
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(path, body, content_type="application/json", headers={**bearer(token), **headers})


@pytest.fixture
def key(owner):
    return api_key_for(owner)


def test_it_creates_once_and_replays_the_first_answer(client, owner, key):
    first = post(client, key, ROUTINES, minimal())
    assert first.status_code == 201, first.content
    again = post(client, key, ROUTINES, minimal())
    assert again.status_code == 201
    assert again.content == first.content  # the same routine, its webhook secret shown again
    assert again["Content-Type"] == first["Content-Type"] == "application/json"
    assert again["X-Request-Id"] == first["X-Request-Id"]
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert Routine.objects.filter(account=owner).count() == 1
    # the replay is counted against the ceiling and carries its headers
    assert (first["X-RateLimit-Remaining"], again["X-RateLimit-Remaining"]) == ("299", "298")


def test_a_client_request_id_on_the_retry_is_returned_unchanged(client, owner, key):
    first = post(client, key, ROUTINES, minimal())
    again = post(client, key, ROUTINES, minimal(), **{"X-Request-Id": "retry-1"})
    assert again["X-Request-Id"] == "retry-1" != first["X-Request-Id"]
    assert again.content == first.content and again["Idempotent-Replayed"] == "true"


def test_without_the_header_each_request_creates(client, owner, key):
    assert post(client, key, ROUTINES, minimal(), key=None).status_code == 201
    assert post(client, key, ROUTINES, minimal(), key=None).status_code == 201
    assert Routine.objects.filter(account=owner).count() == 2
    assert not IdempotentRequest.objects.exists()


def test_the_same_key_with_another_body_is_a_422_naming_the_header(client, owner, key):
    post(client, key, ROUTINES, minimal())
    other = post(client, key, ROUTINES, minimal(name="Another"))
    body = assert_validation(other, "Idempotency-Key")
    assert body["errors"] == {"Idempotency-Key": [body["message"]]}
    assert "another request" in body["message"]
    assert "Idempotent-Replayed" not in other and other["X-RateLimit-Limit"] == "300"
    assert Routine.objects.filter(account=owner).count() == 1


def test_the_same_key_on_another_path_is_another_request(client, owner, key):
    routine = RoutineFactory(account=owner)
    post(client, key, ROUTINES, minimal())
    assert_validation(post(client, key, f"{ROUTINES}/{routine.pk}/run-now", {}), "Idempotency-Key")


def test_a_refusal_is_kept_and_replayed_too(client, owner, key):
    first = post(client, key, ROUTINES, minimal(name=""))
    assert_validation(first, "name")
    again = post(client, key, ROUTINES, minimal(name=""))
    assert (again.status_code, again.content, again["Idempotent-Replayed"]) == (422, first.content, "true")


def test_run_now_queues_one_run_for_a_key(client, owner, key):
    routine = RoutineFactory(account=owner)
    path = f"{ROUTINES}/{routine.pk}/run-now"
    first = post(client, key, path, {}, key="run-1")
    assert first.status_code == 202, first.content
    again = post(client, key, path, {}, key="run-1")
    assert (again.status_code, again.content, again["Idempotent-Replayed"]) == (202, first.content, "true")
    assert Run.objects.filter(routine=routine).count() == 1
    assert post(client, key, path, {}, key="run-2").status_code == 202
    assert Run.objects.filter(routine=routine).count() == 2


def test_a_session_token_shares_the_accounts_keys(client, owner, key):
    first = post(client, key, ROUTINES, minimal())
    again = post(client, session_for(owner), ROUTINES, minimal())
    assert (again.status_code, again.content, again["Idempotent-Replayed"]) == (201, first.content, "true")


def test_another_accounts_same_key_is_its_own(client, owner, outsider, key):
    first = post(client, key, ROUTINES, minimal())
    theirs = post(client, api_key_for(outsider), ROUTINES, minimal())
    assert theirs.status_code == 201 and "Idempotent-Replayed" not in theirs
    assert theirs.json()["routine"]["id"] != first.json()["routine"]["id"]
    assert Routine.objects.filter(account=outsider).count() == 1


def test_a_key_still_being_answered_is_a_409_with_retry_after(client, owner, key):
    """The first request's row as it is while that request is answered: claimed, no answer yet. (Two
    requests at once, over HTTP: tests/compat/test_idempotency.py, tests/native/test_idempotency.py.)"""
    post(client, key, ROUTINES, minimal())
    IdempotentRequest.objects.update(status=None, body=b"", content_type="", headers={},
                                     held_until=timezone.now() + timedelta(minutes=1))
    busy = post(client, key, ROUTINES, minimal())
    assert assert_detail(busy, 409) == "A request with this Idempotency-Key is still being answered; retry in 1 second."
    assert busy["Retry-After"] == "1"
    assert busy["X-RateLimit-Limit"] == "300"
    assert Routine.objects.count() == 1
    assert_validation(post(client, key, ROUTINES, minimal(name="Other")), "Idempotency-Key")  # another body: 422


def test_a_claim_held_past_its_time_is_taken_over(client, owner, key, settings):
    """Its process died mid-answer: once the hold ends, a retry runs anew and its answer is the one kept."""
    past = timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_HOLD_SECONDS + 1)
    IdempotentRequestFactory(account=owner, key=KEY, status=None, body=b"", created_at=past,
                             held_until=past + timedelta(seconds=settings.IDEMPOTENCY_HOLD_SECONDS))
    first = post(client, key, ROUTINES, minimal())
    assert first.status_code == 201 and "Idempotent-Replayed" not in first
    assert post(client, key, ROUTINES, minimal()).content == first.content
    assert Routine.objects.count() == 1


@pytest.mark.parametrize("bad", ["", "x" * 256, "tab\there", "caf\u00e9"])
def test_a_malformed_key_is_a_422_naming_the_header(client, owner, key, bad):
    refused = client.post(ROUTINES, minimal(), content_type="application/json",
                          headers=bearer(key), HTTP_IDEMPOTENCY_KEY=bad)
    body = assert_validation(refused, "Idempotency-Key")
    assert body["message"] == "The Idempotency-Key header must be 1 to 255 printable ASCII characters."
    assert not Routine.objects.exists() and not IdempotentRequest.objects.exists()


def test_a_key_of_255_printable_characters_is_taken(client, owner, key):
    longest = "~ !" + "k" * 252
    assert post(client, key, ROUTINES, minimal(), key=longest).status_code == 201
    assert post(client, key, ROUTINES, minimal(), key=longest)["Idempotent-Replayed"] == "true"


def test_an_expired_key_runs_anew(client, owner, key, settings):
    first = post(client, key, ROUTINES, minimal())
    IdempotentRequest.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    other_body = post(client, key, ROUTINES, minimal(name="Second"))  # not a 422: the old answer is gone
    assert other_body.status_code == 201 and "Idempotent-Replayed" not in other_body
    assert other_body.json()["routine"]["id"] != first.json()["routine"]["id"]
    assert post(client, key, ROUTINES, minimal(name="Second")).content == other_body.content


def test_the_sweep_removes_expired_answers_only(owner, outsider):
    now = timezone.now()
    expired = [IdempotentRequestFactory(account=owner, expires_at=now - timedelta(seconds=1)) for _ in range(3)]
    kept = [IdempotentRequestFactory(account=owner), IdempotentRequestFactory(account=outsider)]
    assert sweep_idempotent_requests() == 3
    assert set(IdempotentRequest.objects.values_list("pk", flat=True)) == {row.pk for row in kept}
    assert not IdempotentRequest.objects.filter(pk__in=[row.pk for row in expired]).exists()
    assert sweep_idempotent_requests() == 0


def test_the_sweep_runs_every_hour_from_beat():
    entry = celery_app.conf.beat_schedule["sweep-idempotent-requests"]
    assert entry["task"] == "accounts.tasks.sweep_idempotent_requests"
    assert entry["task"] in celery_app.tasks
    assert entry["schedule"].minute == {43} and len(entry["schedule"].hour) == 24
