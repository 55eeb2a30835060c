"""The rule of what a key keeps (accounts/idempotency.py), answer by answer: a whole answer, success or
refusal, is kept; a 5xx or a 429, which a retry could cure, and a stream release the key. Over HTTP:
tests/compat/test_idempotency.py, tests/native/test_idempotency.py, tests/routines/test_routines_idempotency.py."""

from types import SimpleNamespace

import pytest
from django.http import HttpResponse, StreamingHttpResponse
from django.test import RequestFactory

from accounts.idempotency import claim
from gateway.models import IdempotentRequest


def keyed_request(account, body=b'{"a": 1}'):
    request = RequestFactory().post("/api/v1/routines", body, content_type="application/json",
                                    HTTP_IDEMPOTENCY_KEY="rule-1")
    request.principal = SimpleNamespace(account=account)
    request.request_id = "first-id"
    return request


@pytest.mark.parametrize("status", [200, 201, 202, 400, 403, 404, 409, 422])
def test_a_whole_answer_is_kept(owner, status):
    once = claim(keyed_request(owner))
    answer = HttpResponse(b'{"x": 1}', status=status, content_type="application/json")
    answer["X-Inference-Request-Id"] = "inf-1"
    once.settle(keyed_request(owner), answer)
    row = IdempotentRequest.objects.get(account=owner, key="rule-1")
    assert (row.status, bytes(row.body), row.content_type, row.held_until) == (
        status, b'{"x": 1}', "application/json", None)
    assert row.headers == {"X-Request-Id": "first-id", "X-Inference-Request-Id": "inf-1"}
    replay = claim(keyed_request(owner)).replay(keyed_request(owner))
    assert (replay.status_code, replay.content, replay["Idempotent-Replayed"]) == (status, b'{"x": 1}', "true")


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_a_failure_a_retry_could_cure_releases_the_key(owner, status):
    once = claim(keyed_request(owner))
    once.settle(keyed_request(owner), HttpResponse(b"{}", status=status, content_type="application/json"))
    assert not IdempotentRequest.objects.exists()
    assert claim(keyed_request(owner, body=b'{"another": 1}')).stored is None  # the key is free


def test_a_stream_releases_the_key(owner):
    once = claim(keyed_request(owner))
    once.settle(keyed_request(owner), StreamingHttpResponse(iter([b"data: 1\n\n"]), content_type="text/event-stream"))
    assert not IdempotentRequest.objects.exists()


def test_a_claim_taken_over_is_not_settled_by_its_first_holder(owner):
    """A request whose claim a retry took over (it was held too long) neither keeps nor releases the key."""
    first = claim(keyed_request(owner))
    IdempotentRequest.objects.update(claim="taken-over")
    first.settle(keyed_request(owner), HttpResponse(b"late", status=200))
    first.release()
    row = IdempotentRequest.objects.get()
    assert (row.claim, row.status, bytes(row.body)) == ("taken-over", None, b"")
