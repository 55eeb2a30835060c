"""The batch rows' factories, beside tests/factories.py (which imports them, so that tests take every factory from
there), kept apart so that it stays a module one reads whole (under 400 lines)."""

from datetime import timedelta

import factory
from django.utils import timezone

from batches.models import Batch, BatchLine


class BatchFactory(factory.django.DjangoModelFactory):
    """A batch as the API leaves it once validated: in progress, its lines made by BatchLineFactory;
    `kind=Batch.Kind.ANTHROPIC` (and a `msgbatch_` id) for a message batch."""

    class Meta:
        model = Batch

    id = factory.Sequence(lambda n: f"batch_{n:024x}")
    account = factory.SubFactory("tests.factories.AccountFactory")
    kind = Batch.Kind.OPENAI
    endpoint = "/v1/chat/completions"
    status = Batch.Status.IN_PROGRESS
    created_at = factory.LazyFunction(timezone.now)
    in_progress_at = factory.LazyAttribute(lambda row: row.created_at)
    expires_at = factory.LazyAttribute(lambda row: row.created_at + timedelta(hours=24))


class BatchLineFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BatchLine

    batch = factory.SubFactory(BatchFactory)
    index = factory.Sequence(lambda n: n)
    custom_id = factory.LazyAttribute(lambda line: f"req-{line.index}")
    body = factory.LazyAttribute(lambda line: {"model": "echo-1", "messages": [{"role": "user",
                                                                                 "content": f"line {line.index}"}]})
