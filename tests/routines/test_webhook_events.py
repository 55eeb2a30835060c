"""POST /api/v1/hooks/{token} (spec 4.7, 6.1): event ids and their sources, the duplicate window,
and the events' bodies as the routine sees them."""

import hashlib
import json

import pytest
import time_machine
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from routines.ingest import PENDING_SECONDS, event_text, ingest, pretty_json
from routines.models import Event
from routines.run_start import queue_runs
from tests.routines import webhook_support
from tests.routines.webhook_support import T0, hook

# the hook view takes events in on a worker thread (routines/intake.py): it must see the test's rows
pytestmark = pytest.mark.django_db(transaction=True)

routine_fixture = webhook_support.routine_fixture  # the fixture `routine`
unsigned_fixture = webhook_support.unsigned_fixture  # the fixture `unsigned`


# --- 6.1 event ids ---------------------------------------------------------------------------


def test_event_id_sources_in_order(client, unsigned):
    all_headers = {"X-Event-Id": "h-event", "X-Request-Id": "h-request", "X-Delivery-Id": "h-delivery",
                   "X-Repo-Delivery": "h-repo"}
    body = json.dumps({"id": "b-id", "event_id": "b-event", "uuid": "b-uuid"}).encode()
    order = ["h-event", "h-request", "h-delivery", "h-repo"]
    for i, expected in enumerate(order):
        headers = {k: v for k, v in all_headers.items() if v in order[i:]}
        assert hook(client, unsigned, body, headers=headers).json()["event_id"] == expected
    for field in ("id", "event_id", "uuid"):
        data = {"id": "b-id", "event_id": "b-event", "uuid": "b-uuid"}
        for earlier in ("id", "event_id", "uuid"):
            if earlier == field:
                break
            del data[earlier]
        assert hook(client, unsigned, json.dumps(data).encode()).json()["event_id"] == data[field]
    plain = b"no id here"
    assert (hook(client, unsigned, plain, content_type="text/plain").json()["event_id"]
            == hashlib.sha256(plain).hexdigest())


def test_the_gateways_own_request_id_is_not_an_event_id(client, unsigned):
    r = hook(client, unsigned, b"ping?", content_type="text/plain")
    assert r.json()["event_id"] == hashlib.sha256(b"ping?").hexdigest()
    assert r["X-Request-Id"] != r.json()["event_id"]


def test_identical_bodies_without_ids_and_empty_pings_are_duplicates(client, unsigned):
    assert hook(client, unsigned, b"same", content_type="text/plain").json()["queued"] is True
    assert hook(client, unsigned, b"same", content_type="text/plain").json()["ignored"] == "duplicate"
    assert hook(client, unsigned, b"", content_type="text/plain").json()["queued"] is True
    r = hook(client, unsigned, b"", content_type="text/plain")
    assert r.json() == {"ok": True, "ignored": "duplicate", "event_id": hashlib.sha256(b"").hexdigest()}


def test_the_duplicate_window_at_its_edges(client, unsigned):
    with time_machine.travel(T0, tick=False) as traveller:
        assert hook(client, unsigned, b'{"id": "w"}').json()["queued"] is True
        traveller.shift(599.9)
        assert hook(client, unsigned, b'{"id": "w"}').json()["ignored"] == "duplicate"
        traveller.shift(0.1)  # 600 s after the first: the window is over
        assert hook(client, unsigned, b'{"id": "w"}').json()["queued"] is True
        traveller.shift(1)
        assert hook(client, unsigned, b'{"id": "w"}').json()["ignored"] == "duplicate"


def test_the_window_is_a_setting(client, unsigned, settings):
    settings.WEBHOOK_DUPLICATE_WINDOW_SECONDS = 5
    with time_machine.travel(T0, tick=False) as traveller:
        assert hook(client, unsigned, b'{"id": "w"}').json()["queued"] is True
        traveller.shift(5)
        assert hook(client, unsigned, b'{"id": "w"}').json()["queued"] is True


def test_duplicates_are_per_routine(client, routine, unsigned):
    assert hook(client, routine, b'{"id": "same"}').json()["queued"] is True
    assert hook(client, unsigned, b'{"id": "same"}').json()["queued"] is True


def test_the_duplicate_window_on_redis(client, unsigned, redis_url):
    test_the_duplicate_window_at_its_edges(client, unsigned)


def test_an_event_lost_between_the_check_and_the_store_is_accepted_when_sent_again(client, unsigned, monkeypatch):
    """The process dies after the duplicate check and before the event is stored (nothing
    undoes the check): a retry is not answered "duplicate" for the whole window."""
    def dies(*args, **kwargs):
        raise SystemExit(1)

    with time_machine.travel(T0, tick=False) as traveller:
        monkeypatch.setattr("routines.ingest.queue_runs", dies)
        with pytest.raises(SystemExit):
            hook(client, unsigned, b'{"id": "lost"}')
        monkeypatch.undo()
        assert not Event.objects.exists()
        traveller.shift(PENDING_SECONDS)
        assert hook(client, unsigned, b'{"id": "lost"}').json() == {"ok": True, "queued": True, "event_id": "lost"}
        assert hook(client, unsigned, b'{"id": "lost"}').json()["ignored"] == "duplicate"


def test_the_same_id_arriving_while_the_first_is_being_stored_is_a_duplicate(unsigned, monkeypatch):
    real = queue_runs
    answers = []

    def meanwhile(entries, then=None):
        answers.append(ingest(unsigned.webhook_token, b'{"id": "twice"}', {}))
        return real(entries, then=then)

    monkeypatch.setattr("routines.ingest.queue_runs", meanwhile)
    assert ingest(unsigned.webhook_token, b'{"id": "twice"}', {})[1]["queued"] is True
    assert answers == [(200, {"ok": True, "ignored": "duplicate", "event_id": "twice"})]
    assert Event.objects.count() == 1


# --- bodies as the routine sees them ---------------------------------------------------------


def test_json_is_pretty_printed_other_content_is_text_empty_is_a_ping():
    assert event_text(b'{"a":{"b":"\xc3\xa9"}}') == '{\n  "a": {\n    "b": "\u00e9"\n  }\n}'
    assert event_text(b"plain words") == "plain words"
    assert event_text(b'"just a string"') == '"just a string"'
    assert event_text(b"") == ""
    assert event_text(b"\xff\xfe bad utf-8") == "\ufffd\ufffd bad utf-8"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30)


@hypothesis_settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, ensure_ascii=st.booleans())
def test_the_pretty_printer_writes_what_json_dumps_writes(value, ensure_ascii):
    """pretty_json replaces json.dumps(indent=2), whose Python encoder leaves reference cycles
    behind on every event (tests/gateway/web/test_hotpath.py): the same text, character for character."""
    assert pretty_json(value, ensure_ascii=ensure_ascii) == json.dumps(value, indent=2, ensure_ascii=ensure_ascii)


def test_lone_surrogates_in_json_are_stored_escaped(client, unsigned):
    r = hook(client, unsigned, b'{"a": "\\ud800", "b": "\xc3\xa9"}')
    assert r.status_code == 200 and r.json()["queued"] is True
    assert Event.objects.get().body == '{\n  "a": "\\ud800",\n  "b": "\\u00e9"\n}'
    r = hook(client, unsigned, b'{"id": "\\udfff-1"}')
    assert r.json() == {"ok": True, "queued": True, "event_id": "\\udfff-1"}
    assert Event.objects.filter(event_id="\\udfff-1").exists()
    assert hook(client, unsigned, b'{"id": "\\udfff-1"}').json()["ignored"] == "duplicate"
