"""Batch lines run outside the per-minute request ceilings (they neither wait for them nor use them up: the
account's live calls keep their whole minute), and /metrics counts the lines ended and the queue's depth."""

import pytest

from batches import runner, tasks
from batches.models import BatchLine
from batches.runner import Outcome
from tests.batches.test_runner import batch_of, served, statuses  # noqa: F401 — `served` is a fixture
from tests.factories import api_key_for, bearer
from tests.gateway.telemetry.test_metrics import samples, value
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture `served` stands on

pytestmark = pytest.mark.django_db(transaction=True)
CEILING = 2  # requests a minute on /v1, and on chat


def test_a_batch_larger_than_the_ceiling_runs_whole_and_leaves_the_live_minute_untouched(served, owner, client,  # noqa: F811
                                                                                          settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": CEILING, "chat": CEILING}
    batch = batch_of(owner, CEILING * 3)

    assert runner.run_batch(batch.pk) == Outcome.ENDED
    assert statuses(batch) == ["succeeded"] * (CEILING * 3)

    key = bearer(api_key_for(owner))
    body = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "live"}]}
    live = [client.post("/v1/chat/completions", body, content_type="application/json", headers=key)
            for _ in range(CEILING + 1)]
    assert [answer.status_code for answer in live] == [200] * CEILING + [429]


def test_metrics_count_the_lines_ended_and_the_lines_waiting(served, owner):  # noqa: F811
    before = samples()
    ran = batch_of(owner, 3)
    runner.run_batch(ran.pk)
    waiting = batch_of(owner, 4, status="in_progress")
    tasks.sweep_batches()
    after = samples()

    grew = value(after, "gateway_batch_lines_total", outcome="succeeded") - value(before, "gateway_batch_lines_total",
                                                                                   outcome="succeeded")
    assert grew == 3
    assert BatchLine.objects.filter(batch=waiting, status="queued").count() == 4
    assert value(after, "gateway_batch_queue_depth") == 4
