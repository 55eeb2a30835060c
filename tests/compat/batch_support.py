"""What the batch tests share: input files written as OpenAI's JSON lines, a batch run in this process by the
batch queue's own tasks (the gateway under test only enqueues them; no worker consumes its queue in the tests),
and an output file read back through the SDK."""

from __future__ import annotations

import json
from typing import Any

from batches.tasks import run_batch, validate_batch

CHAT = "/v1/chat/completions"
CHAT_MODEL = "oa/echo-1"
CLAUDE_MODEL = "an/claude-echo"
# the fields of OpenAI's batch object this gateway writes, no more
BATCH_FIELDS = {"id", "object", "endpoint", "errors", "input_file_id", "completion_window", "status",
                "output_file_id", "error_file_id", "created_at", "in_progress_at", "expires_at", "finalizing_at",
                "completed_at", "failed_at", "expired_at", "cancelling_at", "cancelled_at", "request_counts",
                "metadata"}
MESSAGE_BATCH_FIELDS = {"id", "type", "processing_status", "request_counts", "ended_at", "created_at", "expires_at",
                        "cancel_initiated_at", "archived_at", "results_url"}
DAY = 24 * 60 * 60


def line(custom_id: str, body: dict[str, Any], url: str = CHAT, method: str = "POST") -> dict[str, Any]:
    return {"custom_id": custom_id, "method": method, "url": url, "body": body}


def chat(text: str, model: str = CHAT_MODEL) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}]}


def jsonl(*entries: Any) -> bytes:
    """One JSON line per entry; an entry given as bytes is written as it is (a malformed line)."""
    return b"".join((entry if isinstance(entry, bytes) else json.dumps(entry).encode()) + b"\n" for entry in entries)


def upload(world, content: bytes, purpose: str = "batch", client=None):
    return (client or world.openai).files.create(file=("input.jsonl", content), purpose=purpose)


def create(world, content: bytes, endpoint: str = CHAT, client=None, **options):
    client = client or world.openai
    stored = upload(world, content, client=client)
    return client.batches.create(input_file_id=stored.id, endpoint=endpoint, completion_window="24h", **options)


def run(batch_id: str) -> str:
    """Validate then run the batch, as the batch queue's worker would: what the run ended in."""
    validated = validate_batch(batch_id)
    if validated != "in_progress":
        return validated
    return run_batch(batch_id)


def file_lines(world, file_id: str, client=None) -> list[dict[str, Any]]:
    content = (client or world.openai).files.content(file_id).content
    assert content.endswith(b"\n")
    return [json.loads(raw) for raw in content.splitlines()]


def auth(world, key: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key or world.key}"}
