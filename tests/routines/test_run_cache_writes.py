"""A routine run's model call (a whole completion, gateway/calls/completion.py) carries the provider's
prompt-cache writes to its usage record and prices them at the model's cache-write price, as a
request's call does."""

from decimal import Decimal

import pytest

from gateway.celery import app as celery_app
from gateway.models import UsageRecord
from gateway.state.per_process import flush_all
from routines.runs import execute_run
from tests.factories import ModelFactory, ModelServerFactory, RoutineFactory, RunFactory
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


@pytest.fixture(autouse=True)
def eager():
    """A run's deliveries run inline, so the run has ended when execute_run returns."""
    before = celery_app.conf.CELERY_TASK_ALWAYS_EAGER
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = True
    yield
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = before


def test_a_runs_cache_writes_are_recorded_and_cost_the_cache_write_price(owner, upstream):  # noqa: F811
    server = ModelServerFactory(name="an", kind="anthropic", base_url=upstream.url, read_timeout=5.0)
    ModelFactory(server=server, name="claude-echo", is_default=True, input_price=Decimal("3"),
                 cache_write_price=Decimal("3.75"), output_price=Decimal("15"))
    routine = RoutineFactory(account=owner, name="Digest", prompt="Summarize the day.", delivery_targets=["inapp"])
    upstream.configure(cache_write_tokens=2)
    run = execute_run(RunFactory(routine=routine).pk)
    assert run.status == "succeeded", run.error
    assert flush_all()
    usage = UsageRecord.objects.get(request_id=f"run-{run.pk}")
    assert usage.cache_write_input_tokens == 2 and usage.input_tokens > 2
    # per million: the other input at 3, the writes at 3.75, the output at 15 (in units of 10^-10: × 10^4)
    assert usage.cost_units == ((usage.input_tokens - 2) * 30_000 + 2 * 37_500 + usage.output_tokens * 150_000)
