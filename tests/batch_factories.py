"""The batch rows' factories, beside tests/factories.py (which imports them, so that tests take every factory from
there): a batch is made as batches/create.py makes one (its id, its 24-hour window), its lines as its validation
writes them. Kept apart so that tests/factories.py stays a module one reads whole."""

from datetime import timedelta

import factory
from django.utils import timezone

from batches.models import Batch, BatchLine


class BatchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Batch

    kind = Batch.Kind.OPENAI
    id = factory.LazyAttributeSequence(lambda batch, n: f"{'msgbatch' if batch.kind == 'anthropic' else 'batch'}_"
                                                        f"{n:024x}")
    account = factory.SubFactory("tests.factories.AccountFactory")
    endpoint = "/v1/chat/completions"
    created_at = factory.LazyFunction(timezone.now)
    expires_at = factory.LazyAttribute(lambda batch: batch.created_at + timedelta(hours=24))


class BatchLineFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BatchLine

    batch = factory.SubFactory(BatchFactory)
    index = factory.Sequence(lambda n: n)
    custom_id = factory.Sequence(lambda n: f"request-{n}")
    body = factory.LazyFunction(lambda: {"model": "echo-1", "messages": [{"role": "user", "content": "Hello"}]})
