"""Webhook events that arrive together are taken in together (routines/intake.py):
one batch for whatever waited while the previous one was written, each answer after its
batch committed, the runs enqueued after the answers, and a failed batch failing each event."""

import asyncio

import pytest

import routines.intake as intake
from routines.ingest import Incoming, ingest_many
from routines.models import Event, Run
from routines.routine_writes import new_token
from tests.factories import RoutineFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the batches run on worker threads


@pytest.fixture
def unsigned(owner):
    return RoutineFactory(account=owner, name="Open", prompt="Summarize.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=None, webhook_token=new_token())


@pytest.fixture
def batches(monkeypatch):
    sizes, enqueued = [], []

    def counting(items, **kwargs):
        sizes.append(len(items))
        return ingest_many(items, **kwargs)

    monkeypatch.setattr(intake, "ingest_many", counting)
    monkeypatch.setattr(intake, "enqueue", lambda *ids, origins=None: enqueued.extend(ids))
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
    monkeypatch.setattr(intake, "enqueue", lambda *ids, origins=None: None)
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
    from routines import run_start, tasks

    split, single = [], []
    monkeypatch.setattr(tasks.enqueue_routine_runs, "apply_async",
                        lambda args, kwargs=None, headers=None: split.append((args[0], kwargs)))
    monkeypatch.setattr(tasks.execute_routine_run, "apply_async",
                        lambda args, headers=None: single.append((args[0], (headers or {}).get("gateway_request_id"))))
    run_start.enqueue(1, 2, 3)
    run_start.enqueue(4)
    assert split == [([1, 2, 3], {})] and single == [(4, None)]
    tasks.enqueue_routine_runs([5, 6])  # in the worker: a task per run
    assert single == [(4, None), (5, None), (6, None)]


def test_each_run_of_a_batch_carries_the_id_and_trace_of_the_request_that_queued_it(monkeypatch):
    """The ids and trace contexts travel in the batch's message, then in each run's task headers,
    for the log lines and the trace of the run (gateway/telemetry/logjson.py, task_spans.py)."""
    from routines import run_start, tasks

    split, single = [], []
    monkeypatch.setattr(tasks.enqueue_routine_runs, "apply_async",
                        lambda args, kwargs=None, headers=None: split.append((args[0], kwargs)))
    monkeypatch.setattr(tasks.execute_routine_run, "apply_async",
                        lambda args, headers=None: single.append((args[0], headers["gateway_request_id"],
                                                                  headers.get("traceparent"))))
    trace_a, trace_c = {"traceparent": f"00-{'a' * 32}-{'1' * 16}-01"}, {"traceparent": f"00-{'c' * 32}-{'3' * 16}-01"}
    run_start.enqueue(1, 2, origins=[("req-a", trace_a), ("req-b", {})])
    run_start.enqueue(3, origins=[("req-c", trace_c)])
    assert split == [([1, 2], {"request_ids": ["req-a", "req-b"], "traces": [trace_a, {}]})]
    assert single == [(3, "req-c", trace_c["traceparent"])]
    tasks.enqueue_routine_runs([1, 2], **split[0][1])
    assert single[1:] == [(1, "req-a", trace_a["traceparent"]), (2, "req-b", None)]
    tasks.enqueue_routine_runs([4], request_ids=["req-d"])  # a message queued before traces were carried
    assert single[3:] == [(4, "req-d", None)]


def test_in_one_batch_the_ceiling_refuses_exactly_the_first_event_over_it_and_accounts_stay_apart(
        unsigned, outsider, batches, settings):
    """Check 7 inside a batch: with a ceiling of 2 the 2nd event is the last allowed and the 3rd
    the first refused (not remembered as seen); another account's routine in the same batch has a
    ceiling and rows of its own."""
    settings.WEBHOOK_EVENTS_PER_MINUTE = 2
    theirs = RoutineFactory(account=outsider, name="Theirs", prompt="x", trigger="webhook",
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


def test_each_run_of_a_batch_is_enqueued_with_the_id_of_its_own_request(unsigned, monkeypatch):
    """The batch is drained in the context of the request that started it: each run's request id
    is taken from its own request when the event arrives, not from that context."""
    from gateway.telemetry.logjson import Exchange, current

    handed = []
    monkeypatch.setattr(intake, "enqueue",
                        lambda *ids, origins=None: handed.extend(zip(ids, (rid for rid, _ in origins))))

    async def one(n: int, body: bytes):
        current.set(Exchange(request_id=f"req-{n}"))  # as the request's middleware does
        return await intake.take_in(Incoming(unsigned.webhook_token, body, {}))

    async def run():
        bodies = [b'{"id": "a"}', b'{"id": "a"}', b'{"id": "b"}']
        answers = await asyncio.gather(*(one(n, body) for n, body in enumerate(bodies)))
        await asyncio.gather(*list(intake._intakes[asyncio.get_running_loop()].enqueueing))
        return answers

    answers = asyncio.run(run())
    assert [body.get("queued", body.get("ignored")) for _, body in answers] == [True, "duplicate", True]
    by_event = {Run.objects.get(pk=run_id).event_id: request_id for run_id, request_id in handed}
    assert by_event == {"a": "req-0", "b": "req-2"}
