"""The two cloud batch APIs a batch may be forwarded to (batches/forward.py), as their HTTP shapes are:

- OpenAI's Batch API: the requests written as an input file of JSON lines and uploaded (`POST /files`,
  multipart, purpose `batch`), a batch made of it (`POST /batches`), read until it ends (`GET /batches/{id}`:
  completed, failed, expired or cancelled), its output and error files read back (`GET /files/{id}/content`);
  cancelled by `POST /batches/{id}/cancel`.
- Anthropic's Message Batches: the requests in the body (`POST /v1/messages/batches`), read until its
  `processing_status` is `ended` (`GET /v1/messages/batches/{id}`), its results read back as JSON lines
  (`GET /v1/messages/batches/{id}/results`, the address its `results_url` gives: the server's own address is
  used rather than the one the answer names, so the key goes nowhere else); cancelled by `POST .../cancel`.

Every call goes through the providers' plain requests (gateway/upstream/providers/openai.py `forward` and
`fetch`) at the server's address with its credentials (an Anthropic server's by its `endpoint`): a failure is
an UpstreamError, a malformed answer a ValueError. The answers are read into what batches/forward.py needs:
the batch's state (`State`) and each request's result (`Result`), by `custom_id`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from batches.models import Batch, BatchLine
from gateway.formats.anthropic.replies import chat_usage
from gateway.models import ModelServer
from gateway.registry.snapshot import Target
from gateway.upstream.providers import anthropic, openai

Status, Line = Batch.Status, BatchLine.Status
# Anthropic's error types and the status each comes with (its API's errors page)
ANTHROPIC_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                    "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                    "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529}
OPENAI_CODES = {"batch_expired": Line.EXPIRED, "batch_cancelled": Line.CANCELLED}


@dataclass(frozen=True)
class State:
    """A batch as its cloud reports it: still `running` (a cancel may be asked), or `ended` as `end_as` (ours:
    completed, cancelled or expired); `failed`: why the cloud refused the whole batch, nothing of it run."""

    status: str
    running: bool = False
    ended: bool = False
    end_as: str = ""
    failed: str = ""
    answer: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Result:
    """One request's end at the cloud: a line's status, and for one that ran its status code and body."""

    status: str
    status_code: int | None = None
    body: Any = None


def _json(response) -> dict[str, Any]:
    data = json.loads(response.content)
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    return data


def _json_lines(content: bytes):
    for raw in content.splitlines():
        if raw.strip():
            entry = json.loads(raw)
            if isinstance(entry, dict) and isinstance(entry.get("custom_id"), str):
                yield entry


def _id_of(data: dict[str, Any]) -> str:
    found = data.get("id")
    if not isinstance(found, str) or not found:
        raise ValueError("the answer has no id")
    return found


class OpenAIBatches:
    """OpenAI's Batch API; an OpenAI-compatible server's base URL ends in /v1, as its paths here do not."""

    FORMAT = Batch.Kind.OPENAI  # the batches it takes: their requests in this format

    ENDED = {"completed": Status.COMPLETED, "expired": Status.EXPIRED, "cancelled": Status.CANCELLED}
    RUNNING = ("validating", "in_progress", "finalizing")

    @staticmethod
    async def submit(target: Target, *, name: str, endpoint: str, requests: list[tuple[str, dict]]) -> str:
        """Upload the requests as an input file and make a batch of it; the batch's id there."""
        content = b"".join(json.dumps({"custom_id": custom_id, "method": "POST", "url": endpoint, "body": body},
                                      separators=(",", ":")).encode() + b"\n" for custom_id, body in requests)
        uploaded = await openai.forward(target, "/files", data={"purpose": "batch"},
                                        files={"file": (f"{name}.jsonl", content, "application/jsonl")})
        made = await openai.forward(target, "/batches", json={
            "input_file_id": _id_of(_json(uploaded)), "endpoint": endpoint, "completion_window": "24h",
            "metadata": {"gateway_batch_id": name}})
        return _id_of(_json(made))

    @classmethod
    async def read(cls, target: Target, upstream_id: str) -> State:
        data = _json(await openai.fetch(target, f"/batches/{upstream_id}"))
        status = str(data.get("status"))
        if status == "failed":
            errors = (data.get("errors") or {}).get("data") or []
            why = "; ".join(str(e.get("message")) for e in errors if isinstance(e, dict)) or "no reason given"
            return State(status, ended=True, failed=why, answer=data)
        if status in cls.ENDED:
            return State(status, ended=True, end_as=cls.ENDED[status], answer=data)
        return State(status, running=status in cls.RUNNING, answer=data)

    @staticmethod
    async def results(target: Target, state: State) -> dict[str, Result]:
        """The output file's lines and the error file's, by custom_id."""
        found: dict[str, Result] = {}
        for name in ("output_file_id", "error_file_id"):
            file_id = state.answer.get(name)
            if not isinstance(file_id, str) or not file_id:
                continue
            content = (await openai.fetch(target, f"/files/{file_id}/content")).content
            for entry in _json_lines(content):
                found[entry["custom_id"]] = _openai_result(entry)
        return found

    @staticmethod
    async def cancel(target: Target, upstream_id: str) -> None:
        await openai.forward(target, f"/batches/{upstream_id}/cancel")  # no body, as OpenAI's SDK sends it


def _openai_result(entry: dict[str, Any]) -> Result:
    response, error = entry.get("response"), entry.get("error")
    if isinstance(response, dict) and isinstance(response.get("status_code"), int):
        code = response["status_code"]
        return Result(Line.SUCCEEDED if 200 <= code < 300 else Line.ERRORED, code, response.get("body"))
    error = error if isinstance(error, dict) else {}
    code = error.get("code")
    if code in OPENAI_CODES:
        return Result(OPENAI_CODES[code])
    message = error.get("message") or "The cloud's batch API gave no answer for this request."
    return Result(Line.ERRORED, 500, {"error": {"message": message, "type": "server_error", "param": None,
                                                "code": code or "upstream_error"}})


class AnthropicBatches:
    """Anthropic's Message Batches; an Anthropic server's base URL has no /v1, as its paths here do."""

    FORMAT = Batch.Kind.ANTHROPIC

    PATH = "/v1/messages/batches"

    @classmethod
    async def submit(cls, target: Target, *, name: str, endpoint: str, requests: list[tuple[str, dict]]) -> str:
        made = await openai.forward(target, cls.PATH, json={"requests": [
            {"custom_id": custom_id, "params": body} for custom_id, body in requests]}, at=anthropic.endpoint)
        return _id_of(_json(made))

    @classmethod
    async def read(cls, target: Target, upstream_id: str) -> State:
        data = _json(await openai.fetch(target, f"{cls.PATH}/{upstream_id}", at=anthropic.endpoint))
        status = str(data.get("processing_status"))
        if status != "ended":
            return State(status, running=status == "in_progress", answer=data)
        counts = data.get("request_counts") or {}
        end_as = (Status.CANCELLED if data.get("cancel_initiated_at") else
                  Status.EXPIRED if counts.get("expired") else Status.COMPLETED)
        return State(status, ended=True, end_as=end_as, answer=data)

    @classmethod
    async def results(cls, target: Target, state: State) -> dict[str, Result]:
        upstream_id = _id_of(state.answer)
        content = (await openai.fetch(target, f"{cls.PATH}/{upstream_id}/results", at=anthropic.endpoint)).content
        return {entry["custom_id"]: _anthropic_result(entry.get("result")) for entry in _json_lines(content)}

    @classmethod
    async def cancel(cls, target: Target, upstream_id: str) -> None:
        await openai.forward(target, f"{cls.PATH}/{upstream_id}/cancel", at=anthropic.endpoint)  # no body


def _anthropic_result(result: Any) -> Result:
    result = result if isinstance(result, dict) else {}
    kind = result.get("type")
    if kind == "succeeded":
        return Result(Line.SUCCEEDED, 200, result.get("message"))
    if kind == "canceled":
        return Result(Line.CANCELLED)
    if kind == "expired":
        return Result(Line.EXPIRED)
    error = result.get("error") if isinstance(result.get("error"), dict) else {}
    inner = error.get("error") if isinstance(error.get("error"), dict) else {}
    if not inner:  # no error body: one in Anthropic's shape, saying so
        error = {"type": "error", "error": {"type": "api_error", "message": "The cloud's batch API gave no "
                                                                           "answer for this request."}}
        inner = error["error"]
    return Result(Line.ERRORED, ANTHROPIC_STATUS.get(inner.get("type"), 500), error)


# The batch API of each kind of server (batches/cloud_apis.py puts the others' beside these)
APIS = {ModelServer.Kind.OPENAI: OpenAIBatches, ModelServer.Kind.ANTHROPIC: AnthropicBatches}


def usage_of(kind: str, body: Any) -> tuple[int, int, int, int]:
    """(input, output, of the input read from the prompt cache, of it written there) of an answer's usage,
    in the chat form the gateway meters (an Anthropic usage translated as every Anthropic reply's is)."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return 0, 0, 0, 0
    if kind == Batch.Kind.ANTHROPIC:
        usage = chat_usage(usage)
    details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
    return tuple(_count(value) for value in (usage.get("prompt_tokens"), usage.get("completion_tokens"),
                                              details.get("cached_tokens"), details.get("cache_write_tokens")))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
