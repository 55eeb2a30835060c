"""The clouds' batch APIs, answered at once from the server's own replies: OpenAI's Files and Batch API
(`POST /v1/files`, `POST /v1/batches`, `GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`,
`GET /v1/files/{id}/content`) and Anthropic's Message Batches (`POST /v1/messages/batches`,
`GET /v1/messages/batches/{id}`, `GET .../results` (its `results_url`), `POST .../cancel`).

Each request of a batch is answered as the chat, embeddings or messages route answers it (the echo reply,
its usage), when the batch ends. Knobs: `batch_pending_polls` reads of a batch report it in progress before
it ends; `batch_failing_ids` are custom_ids answered with the server's 500 instead; `batch_refused` fails
an OpenAI batch whole (`failed`, its `errors` saying this), nothing of it run. A cancel ends a batch not yet
ended at its next read, each of its requests cancelled."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from . import anthropic_wire, extras, openai_wire
from .core import ClientError, Reply, dumps, json_reply

PREFIXES = ("/v1/files", "/v1/batches", "/v1/messages/batches")
OPENAI_ROUTES = {"/v1/chat/completions": openai_wire.chat_completions, "/v1/embeddings": extras.embeddings}
_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}{next(_ids):024x}"


def route(req, knobs: dict[str, Any], store: dict[str, Any]) -> Reply:
    """`store`: the server's files and batches (emptied with its request log)."""
    parts = req.path.strip("/").split("/")
    if req.path.startswith("/v1/messages/batches"):
        return _anthropic(req, parts[3:], knobs, store)
    if req.method == "POST" and req.path == "/v1/files":
        return _upload(req, store)
    if req.method == "GET" and len(parts) == 4 and parts[1] == "files" and parts[3] == "content":
        file = store.setdefault("files", {}).get(parts[2])
        if file is None:
            raise ClientError(404, f"No such File object: {parts[2]}", "id")
        return Reply(file["content"], content_type=b"application/octet-stream")
    if req.method == "POST" and req.path == "/v1/batches":
        return _openai_create(req.json, store)
    if parts[1] == "batches" and len(parts) >= 3:
        batch = store.setdefault("batches", {}).get(parts[2])
        if batch is None or batch["object"] != "batch":
            raise ClientError(404, f"No batch found with id '{parts[2]}'.", "batch_id")
        if req.method == "GET" and len(parts) == 3:
            return json_reply(_openai_read(batch, knobs, store))
        if req.method == "POST" and parts[3:] == ["cancel"]:
            if batch["status"] in ("validating", "in_progress", "finalizing"):
                batch.update(status="cancelling", cancelling_at=int(time.time()))
            return json_reply(_public(batch))
    raise ClientError(404, f"Unknown request URL: {req.method} {req.path}.")


def _upload(req, store: dict[str, Any]) -> Reply:
    fields = extras.parse_multipart(req.headers.get("content-type", ""), req.body)
    if "file" not in fields or fields.get("purpose", (None, b""))[1] != b"batch":
        raise ClientError(400, "'file' and 'purpose' (batch) are required", "purpose")
    filename, content = fields["file"]
    file = {"id": _new_id("file-"), "object": "file", "bytes": len(content), "created_at": int(time.time()),
            "filename": filename or "input.jsonl", "purpose": "batch", "status": "processed"}
    store.setdefault("files", {})[file["id"]] = {**file, "content": content}
    return json_reply(file)


def _file(store: dict[str, Any], content: bytes, name: str, purpose: str = "batch_output") -> str:
    file_id = _new_id("file-")
    store.setdefault("files", {})[file_id] = {"id": file_id, "object": "file", "bytes": len(content),
                                              "created_at": int(time.time()), "filename": name,
                                              "purpose": purpose, "content": content}
    return file_id


def _openai_create(body: Any, store: dict[str, Any]) -> Reply:
    if not isinstance(body, dict) or not isinstance(body.get("input_file_id"), str):
        raise ClientError(400, "'input_file_id' is required", "input_file_id")
    if body["input_file_id"] not in store.setdefault("files", {}):
        raise ClientError(400, f"Invalid 'input_file_id': '{body['input_file_id']}'", "input_file_id")
    if body.get("endpoint") not in OPENAI_ROUTES or body.get("completion_window") != "24h":
        raise ClientError(400, "an endpoint this server batches and completion_window 24h are required", "endpoint")
    now = int(time.time())
    batch = {"id": _new_id("batch_"), "object": "batch", "endpoint": body["endpoint"], "errors": None,
             "input_file_id": body["input_file_id"], "completion_window": "24h", "status": "validating",
             "output_file_id": None, "error_file_id": None, "created_at": now, "in_progress_at": None,
             "expires_at": now + 86400, "finalizing_at": None, "completed_at": None, "failed_at": None,
             "expired_at": None, "cancelling_at": None, "cancelled_at": None, "metadata": body.get("metadata"),
             "request_counts": {"total": 0, "completed": 0, "failed": 0}, "reads": 0}
    store.setdefault("batches", {})[batch["id"]] = batch
    return json_reply(_public(batch))


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if k not in ("reads", "requests", "results")}


def _openai_read(batch: dict[str, Any], knobs: dict[str, Any], store: dict[str, Any]) -> dict[str, Any]:
    batch["reads"] += 1
    now = int(time.time())
    if batch["status"] in ("completed", "failed", "expired", "cancelled"):
        return _public(batch)
    lines = [json.loads(raw) for raw in store["files"][batch["input_file_id"]]["content"].splitlines() if raw.strip()]
    batch["request_counts"]["total"] = len(lines)
    if knobs["batch_refused"]:
        batch.update(status="failed", failed_at=now, errors={"object": "list", "data": [
            {"code": "refused", "message": knobs["batch_refused"], "param": None, "line": None}]})
        return _public(batch)
    cancelled = batch["status"] == "cancelling"
    if not cancelled and batch["reads"] <= knobs["batch_pending_polls"]:
        batch.update(status="in_progress", in_progress_at=batch["in_progress_at"] or now)
        return _public(batch)
    output, errors = [], []
    for index, line in enumerate(lines):
        entry = {"id": f"batch_req_{index:024x}", "custom_id": line["custom_id"], "response": None, "error": None}
        if cancelled:
            entry["error"] = {"code": "batch_cancelled", "message": "The batch was cancelled."}
            errors.append(entry)
            continue
        status, body = _answer(OPENAI_ROUTES[batch["endpoint"]], line["body"], line["custom_id"], knobs, False)
        entry["response"] = {"status_code": status, "request_id": _new_id("req_"), "body": body}
        (output if status == 200 else errors).append(entry)
    for name, entries in (("output_file_id", output), ("error_file_id", errors)):
        if entries:
            content = b"".join(dumps(e).encode() + b"\n" for e in entries)
            batch[name] = _file(store, content, f"{batch['id']}_{name[:-8]}.jsonl")
    batch["request_counts"].update(completed=len(output), failed=len(errors))
    ended = "cancelled" if cancelled else "completed"
    batch.update(status=ended, finalizing_at=now, **{f"{ended}_at": now})
    return _public(batch)


def _answer(handler, body: Any, custom_id: str, knobs: dict[str, Any], anthropic: bool) -> tuple[int, Any]:
    """The status and body the server's own route gives the request (its error body on a failure)."""
    try:
        if custom_id in knobs["batch_failing_ids"]:
            raise ClientError(500, "The model crashed (batch_failing_ids).")
        reply = handler({**body, "stream": False} if anthropic else body, knobs)
        return reply.status, json.loads(reply.body)
    except ClientError as exc:
        if anthropic:
            return exc.status, anthropic_wire.error_body(exc.status, exc.message, _new_id("req_"))
        return exc.status, openai_wire.error_body(exc.status, exc.message, exc.param)


# ---- Anthropic's Message Batches ----------------------------------------------------------------

def _anthropic(req, rest: list[str], knobs: dict[str, Any], store: dict[str, Any]) -> Reply:
    batches = store.setdefault("batches", {})
    if req.method == "POST" and not rest:
        requests = (req.json or {}).get("requests") if isinstance(req.json, dict) else None
        if not isinstance(requests, list) or not requests:
            raise ClientError(400, "requests: a non-empty list is required")
        now = time.time()
        batch = {"id": _new_id("msgbatch_"), "type": "message_batch", "processing_status": "in_progress",
                 "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0,
                                    "expired": 0},
                 "ended_at": None, "created_at": _moment(now), "expires_at": _moment(now + 86400),
                 "archived_at": None, "cancel_initiated_at": None, "results_url": None, "reads": 0,
                 "requests": requests}
        batches[batch["id"]] = batch
        return json_reply(_public(batch))
    batch = batches.get(rest[0]) if rest else None
    if batch is None or batch.get("type") != "message_batch":
        raise ClientError(404, f"No message batch found with id '{rest[0] if rest else ''}'.")
    if req.method == "GET" and len(rest) == 1:
        return json_reply(_anthropic_read(batch, knobs, req.headers.get("host", "")))
    if req.method == "GET" and rest[1:] == ["results"]:
        if batch["processing_status"] != "ended":
            raise ClientError(400, "The batch has not ended yet.")
        return Reply(b"".join(dumps(r).encode() + b"\n" for r in batch["results"]),
                     content_type=b"application/binary")
    if req.method == "POST" and rest[1:] == ["cancel"]:
        if batch["processing_status"] == "in_progress":
            batch.update(processing_status="canceling", cancel_initiated_at=_moment(time.time()))
        return json_reply(_public(batch))
    raise ClientError(404, f"Unknown request URL: {req.method} {req.path}.")


def _moment(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _anthropic_read(batch: dict[str, Any], knobs: dict[str, Any], host: str) -> dict[str, Any]:
    batch["reads"] += 1
    if batch["processing_status"] == "ended":
        return _public(batch)
    cancelled = batch["processing_status"] == "canceling"
    if not cancelled and batch["reads"] <= knobs["batch_pending_polls"]:
        return _public(batch)
    results, counts = [], {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    for request in batch["requests"]:
        if cancelled:
            result: dict[str, Any] = {"type": "canceled"}
        else:
            status, body = _answer(anthropic_wire.messages_create, request["params"], request["custom_id"], knobs,
                                   True)
            result = {"type": "succeeded", "message": body} if status == 200 else {"type": "errored", "error": body}
        counts[{"errored": "errored", "canceled": "canceled"}.get(result["type"], "succeeded")] += 1
        results.append({"custom_id": request["custom_id"], "result": result})
    batch.update(processing_status="ended", ended_at=_moment(time.time()), request_counts=counts, results=results,
                 results_url=f"http://{host}/v1/messages/batches/{batch['id']}/results")
    return _public(batch)
