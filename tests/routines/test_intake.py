"""Webhook events that arrive together are taken in together (routines/intake.py, issue 13 item
3): one batch for whatever waited while the previous one was written, each answer after its
batch committed, the runs enqueued after the answers, and a failed batch failing each event."""

import asyncio

import pytest

import routines.intake as intake
from routines.ingest import Incoming, ingest_many
from routines.models import Event, Routine, Run
from routines.routine_writes import new_token

pytestmark = pytest.mark.django_db(transaction=True)  # the batches run on worker threads


@pytest.fixture
def unsigned(owner):
    return Routine.objects.create(account=owner, name="Open", prompt="Summarize.", trigger="webhook",
                                  delivery_targets=["inapp"], webhook_secret=None, webhook_token=new_token())


@pytest.fixture
def batches(monkeypatch):
    sizes, enqueued = [], []

    def counting(items, **kwargs):
        sizes.append(len(items))
        return ingest_many(items, **kwargs)

    monkeypatch.setattr(intake, "ingest_many", counting)
    monkeypatch.setattr(intake, "enqueue", lambda *ids: enqueued.extend(ids))
    return sizes, enqueued


def _together(token: str, bodies: list[bytes]):
    async def run():
        answers = await asyncio.gather(*(intake.take_in(Incoming(token, body, {})) for body in bodies))
        pending = list(intake._intakes[asyncio.get_running_loop()].enqueueing)
        await asyncio.gather(*pending)  # the runs are handed to the queue after the answers
        return answers

    return asyncio.run(run())


def test_events_arriving_together_share_a_batch_and_each_gets_its_own_answer(unsigned, batches):
    sizes, enqueued = batches
    bodies = [b'{"id": "a"}', b'{"id": "b"}', b'{"id": "a"}', b'{"id": "c"}', b'{"id": "d"}']
    answers = _together(unsigned.webhook_token, bodies)
    assert sizes == [5]  # all arrived before the first batch started: one query, one transaction
    assert answers == [(200, {"ok": True, "queued": True, "event_id": "a"}),
                       (200, {"ok": True, "queued": True, "event_id": "b"}),
                       (200, {"ok": True, "ignored": "duplicate", "event_id": "a"}),
                       (200, {"ok": True, "queued": True, "event_id": "c"}),
                       (200, {"ok": True, "queued": True, "event_id": "d"})]
    assert sorted(Event.objects.values_list("event_id", flat=True)) == ["a", "b", "c", "d"]
    assert sorted(enqueued) == sorted(Run.objects.values_list("pk", flat=True))


def test_a_failed_batch_fails_each_event_and_their_retries_are_taken(unsigned, batches, monkeypatch):
    sizes, _ = batches

    def database_down(entries, then=None):
        from django.db import OperationalError

        raise OperationalError("the database is away")

    monkeypatch.setattr("routines.ingest.queue_runs", database_down)
    from django.db import OperationalError

    with pytest.raises(OperationalError):
        _together(unsigned.webhook_token, [b'{"id": "x"}', b'{"id": "y"}'])
    assert not Event.objects.exists()
    monkeypatch.undo()
    monkeypatch.setattr(intake, "enqueue", lambda *ids: None)
    answers = _together(unsigned.webhook_token, [b'{"id": "x"}', b'{"id": "y"}'])
    assert [body.get("queued") for _, body in answers] == [True, True]  # the marks were removed


def test_a_failure_at_the_duplicate_look_up_leaves_no_mark(unsigned, monkeypatch):
    """The marks are set before the stored events are read: when that read fails, they are
    removed, so the sender's retry is not answered "duplicate" (and lost)."""
    from django.db import OperationalError

    from routines import ingest

    real = ingest._stored_ids

    def database_down(checked):
        raise OperationalError("the database is away")

    monkeypatch.setattr(ingest, "_stored_ids", database_down)
    with pytest.raises(OperationalError):
        ingest.ingest(unsigned.webhook_token, b'{"id": "kept"}', {})
    monkeypatch.setattr(ingest, "_stored_ids", real)
    assert ingest.ingest(unsigned.webhook_token, b'{"id": "kept"}', {})[1]["queued"] is True


def test_a_batch_of_runs_is_one_message_that_a_worker_splits(monkeypatch):
    from routines import runs, tasks

    split, single = [], []
    monkeypatch.setattr(tasks.enqueue_routine_runs, "delay", lambda ids: split.append(ids))
    monkeypatch.setattr(tasks.execute_routine_run, "delay", lambda run_id: single.append(run_id))
    runs.enqueue(1, 2, 3)
    runs.enqueue(4)
    assert split == [[1, 2, 3]] and single == [4]
    tasks.enqueue_routine_runs([5, 6])  # in the worker: a task per run
    assert single == [4, 5, 6]


def test_in_one_batch_the_ceiling_refuses_exactly_the_first_event_over_it_and_accounts_stay_apart(
        unsigned, outsider, batches, settings):
    """Check 7 inside a batch: with a ceiling of 2 the 2nd event is the last allowed and the 3rd
    the first refused (not remembered as seen); another account's routine in the same batch has a
    ceiling and rows of its own."""
    settings.WEBHOOK_EVENTS_PER_MINUTE = 2
    theirs = Routine.objects.create(account=outsider, name="Theirs", prompt="x", trigger="webhook",
                                    delivery_targets=["inapp"], webhook_secret=None, webhook_token=new_token())
    items = [Incoming(unsigned.webhook_token, b'{"id": "1"}', {}), Incoming(unsigned.webhook_token, b'{"id": "2"}', {}),
             Incoming(theirs.webhook_token, b'{"id": "1"}', {}), Incoming(unsigned.webhook_token, b'{"id": "3"}', {})]
    answers = ingest_many(items)
    assert [body for _, body in answers] == [
        {"ok": True, "queued": True, "event_id": "1"}, {"ok": True, "queued": True, "event_id": "2"},
        {"ok": True, "queued": True, "event_id": "1"}, {"ok": True, "ignored": "rate_limited"}]
    assert sorted(Event.objects.filter(routine=unsigned).values_list("event_id", flat=True)) == ["1", "2"]
    assert list(Event.objects.filter(routine=theirs).values_list("event_id", flat=True)) == ["1"]
    assert set(Run.objects.values_list("routine__account", flat=True)) == {unsigned.account_id, outsider.pk}
