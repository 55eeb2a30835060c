"""Shared pieces of the reference upstream: knobs, the request log, response shapes, token helpers."""

from __future__ import annotations

import copy
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

# Every knob, with its default. `configure()` refuses any other name, so a typo fails loudly.
DEFAULTS: dict[str, Any] = {
    "kind": "both",  # which wire formats are served: "openai", "anthropic" or "both"
    "latency_ms": 0,  # delay before the response headers
    "tokens_per_second": 0,  # pace of streamed tokens; 0 = as fast as possible
    "reply": None,  # text that replaces the "Echo: ..." default
    "usage": True,  # False: no usage anywhere (the gateway must count itself)
    "cached_tokens": 0,  # of the prompt's tokens, this many read from the provider's prompt cache (usage says so)
    "cache_write_tokens": 0,  # of the prompt's other tokens, this many written to the prompt cache (usage says so)
    "tool_name": None,  # tool to call instead of the first one offered (not a string: a malformed reply)
    "tool_arguments": {},  # arguments of that call (a dict, or a raw JSON string)
    "tool_script": None,  # OpenAI chat: a list of {"name", "arguments"}; round N after the last user message
                          # calls entry N
    "models": ["echo-1"],
    "embedding_dim": 64,
    "require_key": None,  # demand "Authorization: Bearer KEY" or "x-api-key: KEY"
    "fail_status": None,  # answer this status with the provider's error body
    "fail_times": -1,  # -1 = every request fails; N = the next N requests fail
    "fail_paths": None,  # None = every path; or a list of path prefixes
    "cut_after_tokens": None,  # streams: drop the connection after N tokens; other POSTs: no response
    "stall_after_tokens": None,  # streams: hang after N tokens for stall_seconds
    "stall_seconds": 30,
    "end_delay_ms": 0,  # streams: end the body this long after the last event
    "record": True,  # keep every request in `requests` (turn off for long benchmarks)
    "ollama_only": False,  # list models only as Ollama does (`/api/tags`); `/v1/models` answers 404
    "leak_credentials": False,  # error messages echo the request's Authorization / x-api-key (a leaky server)
    "error_after_tokens": None,  # streams: an error event after N tokens, then the end of the body
    # the clouds' batch APIs (batch_wire.py): reads of a batch that report it in progress before it ends, the
    # custom_ids answered with the server's 500, and a message that fails an OpenAI batch whole
    "batch_pending_polls": 0,
    "batch_failing_ids": [],
    "batch_refused": None,
}
KINDS = ("openai", "anthropic", "both")
_NUMBER_KNOBS = ("latency_ms", "tokens_per_second", "stall_seconds", "end_delay_ms")
_INT_KNOBS = ("embedding_dim", "fail_status", "fail_times", "cached_tokens", "cache_write_tokens",
              "cut_after_tokens", "stall_after_tokens", "error_after_tokens", "batch_pending_polls")


@dataclass
class RecordedRequest:
    """One request as the server saw it. Readable as attributes or as a dict (`req["json"]`)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    client: tuple[str, int] | None = None  # the caller's address and port: one per connection

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default)


@dataclass
class State:
    """Knobs plus the request log; shared by the ASGI app (event-loop thread) and the controller."""

    knobs: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULTS))
    requests: list[RecordedRequest] = field(default_factory=list)
    store: dict[str, Any] = field(default_factory=dict)  # the batch APIs' files and batches (batch_wire.py)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def configure(self, **knobs: Any) -> dict[str, Any]:
        unknown = sorted(set(knobs) - DEFAULTS.keys())
        if unknown:
            raise TypeError(f"unknown upstream knob(s): {', '.join(unknown)}; known: {', '.join(DEFAULTS)}")
        for name, value in knobs.items():
            _check(name, value)
        with self.lock:
            self.knobs = {**self.knobs, **copy.deepcopy(knobs)}
        return self.knobs

    def reset(self) -> None:
        with self.lock:
            self.knobs = copy.deepcopy(DEFAULTS)
            self.requests.clear()
            self.store.clear()

    def take_failure(self, path: str) -> int | None:
        """The status to fail this request with, if any; counts down `fail_times`."""
        knobs = self.knobs
        status = knobs["fail_status"]
        if status is None or knobs["fail_times"] == 0:
            return None
        prefixes = knobs["fail_paths"]
        if prefixes is not None and not any(path.startswith(p) for p in prefixes):
            return None
        with self.lock:
            if knobs["fail_times"] > 0:
                knobs["fail_times"] -= 1
        return status


def _check(name: str, value: Any) -> None:
    ok = True
    if name in _NUMBER_KNOBS:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    elif name in _INT_KNOBS:
        ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
        if name in ("embedding_dim", "fail_times", "cached_tokens", "cache_write_tokens", "batch_pending_polls"):
            least = {"embedding_dim": 1, "fail_times": -1}.get(name, 0)
            ok = isinstance(value, int) and value >= least
    elif name == "kind":
        ok = value in KINDS
    elif name in ("usage", "record", "ollama_only", "leak_credentials"):
        ok = isinstance(value, bool)
    elif name in ("fail_paths", "models", "batch_failing_ids"):
        ok = (value is None and name == "fail_paths") or (
            isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))
    elif name == "tool_name":  # any JSON value: a name that is not a string makes a malformed reply
        ok = value is None or isinstance(value, (str, int, float, list, dict))
    elif name in ("reply", "require_key", "batch_refused"):
        ok = value is None or isinstance(value, str)
    elif name == "tool_arguments":
        ok = isinstance(value, (dict, str))
    elif name == "tool_script":
        ok = value is None or (isinstance(value, (list, tuple)) and all(
            isinstance(v, dict) and isinstance(v.get("arguments", {}), (dict, str)) for v in value))
    if not ok:
        raise ValueError(f"bad value for upstream knob {name}: {value!r}")


# ---- what the handlers return ------------------------------------------------------------------

class ClientError(Exception):
    """A 4xx the handler wants sent in the provider's error shape."""

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


@dataclass
class Reply:
    """A complete (non-streamed) response."""

    body: bytes
    content_type: bytes = b"application/json"
    status: int = 200
    headers: tuple[tuple[bytes, bytes], ...] = ()


@dataclass
class Stream:
    """An SSE response: `head` frames, one frame per token, then `tail` frames (the end events).
    Cut and stall knobs act between token frames; `tail` is what a cut stream never gets."""

    head: list[bytes]
    tokens: list[bytes]
    tail: list[bytes]


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def json_reply(obj: Any, status: int = 200) -> Reply:
    return Reply(dumps(obj).encode(), status=status)


# ---- text helpers ------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*\S+\s*")


def split_tokens(text: str) -> list[str]:
    """Whitespace tokens with their spaces attached: "".join(split_tokens(t)) == t."""
    tokens = _TOKEN.findall(text)
    return tokens or ([text] if text else [])


def count_words(text: str) -> int:
    return len(text.split())


def split_arguments(arguments: str) -> list[str]:
    """Tool-call arguments as they are streamed: in two pieces when they can be split."""
    half = len(arguments) // 2
    return [arguments[:half], arguments[half:]] if half else [arguments]


def tool_arguments(knobs: dict[str, Any]) -> str:
    value = knobs["tool_arguments"]
    return value if isinstance(value, str) else dumps(value)


def limit_tokens(tokens: list[str], limit: Any) -> tuple[list[str], bool]:
    """Truncate to `limit` tokens; the flag says whether anything was cut off."""
    if isinstance(limit, int) and not isinstance(limit, bool) and 0 <= limit < len(tokens):
        return tokens[:limit], True
    return tokens, False


def default_reply(knobs: dict[str, Any], last_user_text: str) -> str:
    return knobs["reply"] if knobs["reply"] is not None else "Echo: " + last_user_text
