"""What the tests of batches forwarded to a cloud's batch API share (tests/batches/test_forward*.py): the cloud
(the reference upstream with its batch APIs, tests/upstream/batch_wire.py) as a server that forwards batches,
the batches, and the tasks queued, recorded instead of sent to the broker."""

from __future__ import annotations

import io
import itertools
import json
from decimal import Decimal

import pytest

from batches import queue
from batches.models import Batch, BatchLine
from gateway.files import store
from tests.factories import BatchFactory, BatchLineFactory, ModelFactory, ModelServerFactory
from tests.upstream.extras import parse_multipart

KEY = "sk-cloud-key"
_numbers = itertools.count(1)


@pytest.fixture
def queued(monkeypatch) -> list[tuple[str, str, float | None]]:
    """(task name, batch id, countdown) of each task queued, once its transaction commits."""
    sent: list[tuple[str, str, float | None]] = []

    class Recorder:
        def __init__(self, name: str) -> None:
            self.name = name

        def apply_async(self, args, **options) -> None:
            sent.append((self.name, args[0], options.get("countdown")))

    monkeypatch.setattr(queue, "task", Recorder)
    return sent


def openai_cloud(upstream, *, name: str = "oa", forward: bool = True, model: str = "echo-1", default: bool = True):
    """An OpenAI-compatible server on the reference upstream, its model priced (2 and 8 per million)."""
    upstream.configure(require_key=KEY)
    server = ModelServerFactory(name=name, kind="openai", base_url=f"{upstream.url}/v1", api_key=KEY, is_remote=True,
                                read_timeout=5.0, forward_batches=forward)
    ModelFactory(server=server, name=model, is_default=default, input_price=Decimal("2"), output_price=Decimal("8"))
    return server


def anthropic_cloud(upstream, *, name: str = "claude", forward: bool = True, model: str = "echo-1"):
    upstream.configure(require_key=KEY)
    server = ModelServerFactory(name=name, kind="anthropic", base_url=upstream.url, api_key=KEY, is_remote=True,
                                read_timeout=5.0, forward_batches=forward)
    ModelFactory(server=server, name=model, input_price=Decimal("3"), output_price=Decimal("15"))
    return server


def chat(index: int, model: str = "echo-1") -> dict:
    return {"model": model, "messages": [{"role": "user", "content": f"line {index}"}]}


def openai_batch(owner, bodies: list[dict], endpoint: str = "/v1/chat/completions", **fields) -> Batch:
    """An OpenAI batch as its surface leaves it: validating, its input file stored."""
    content = b"".join(json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": endpoint, "body": body}).encode()
                       + b"\n" for i, body in enumerate(bodies))
    stored = store.save_file(owner, io.BytesIO(content), filename="input.jsonl", purpose="batch", size=len(content),
                             quota=False)
    return BatchFactory(account=owner, status="validating", in_progress_at=None, input_file=stored,
                        input_file_name=stored.pk, endpoint=endpoint, **fields)


def anthropic_batch(owner, bodies: list[dict]) -> tuple[Batch, list[BatchLine]]:
    """An Anthropic message batch as its surface makes it: in progress, its lines written."""
    batch = BatchFactory(account=owner, id=f"msgbatch_{next(_numbers):024x}",
                         kind=Batch.Kind.ANTHROPIC, endpoint="/v1/messages")
    lines = [BatchLineFactory(batch=batch, index=i, custom_id=f"msg-{i}", body=body) for i, body in enumerate(bodies)]
    return batch, lines


def calls(upstream, prefix: str) -> list:
    return [r for r in upstream.requests if r.path.startswith(prefix)]


def form_of(request) -> dict[str, tuple[str | None, bytes]]:
    return parse_multipart(request.headers["content-type"], request.body)


def statuses(batch) -> list[str]:
    return list(BatchLine.objects.filter(batch=batch).order_by("index").values_list("status", flat=True))
