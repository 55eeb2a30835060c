"""A recording fake of Gemini's own API (generativelanguage, v1beta) for driving Gemini CLI: generateContent,
streamGenerateContent (`alt=sse`), countTokens and the model list, on a free loopback port.

It answers as Gemini 2.5 does: a reply's parts come in candidates[0].content, usage in usageMetadata, and a
stream is server-sent events of whole GenerateContentResponse objects (`data: {...}` and a blank line, CRLF),
the last one carrying finishReason. It is scripted like the suite's reference upstream: with `tool_name` set and
that function declared in the request, a turn that ends in the user's text is answered with a functionCall of
it (`tool_arguments` as its args, no id, as Gemini 2.5 sends none); a turn that ends in functionResponse parts
with "Tool said: " and the response's `output`; any other turn echoes the user's last text. Every request is
recorded, and one without the key the fake was given is refused as Google refuses a bad API key."""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from tests.servers import serving

DEFAULTS: dict[str, Any] = {
    "key": None,  # demand this API key (x-goog-api-key, ?key= or a bearer token); None takes any
    "tool_name": None,  # the function to call on a turn that ends in the user's text, when it is declared
    "tool_arguments": {},  # its args
    "reply": None,  # text that replaces the "Echo: ..." answer
    "models": ["gemini-2.5-flash", "gemini-2.5-pro"],
}


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names
    json: Any


@dataclass
class State:
    knobs: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULTS))
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class GeminiError(Exception):
    def __init__(self, code: int, status: str, message: str):
        super().__init__(message)
        self.code, self.status, self.message = code, status, message

    def body(self) -> bytes:
        return json.dumps({"error": {"code": self.code, "message": self.message, "status": self.status}}).encode()


def _key(request: Recorded) -> str | None:
    bearer = request.headers.get("authorization", "")
    return (request.headers.get("x-goog-api-key") or (parse_qs(request.query).get("key") or [None])[0]
            or (bearer[7:] if bearer.startswith("Bearer ") else None))


def _declared(body: dict[str, Any]) -> set[str]:
    return {declaration.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)
            for declaration in tool.get("functionDeclarations") or [] if isinstance(declaration, dict)}


def _last_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents or not isinstance(contents[-1], dict):
        raise GeminiError(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
    return [part for part in contents[-1].get("parts") or [] if isinstance(part, dict)]


def answer(body: Any, knobs: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The model's parts for a generateContent body, and its prompt's token count (one a word)."""
    if not isinstance(body, dict):
        raise GeminiError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
    parts = _last_parts(body)
    prompt = sum(len(json.dumps(content).split()) for content in body["contents"])
    results = [part["functionResponse"] for part in parts if isinstance(part.get("functionResponse"), dict)]
    if results:
        response = results[-1].get("response") or {}
        output = response.get("output") if isinstance(response.get("output"), str) else json.dumps(response)
        return [{"text": f"Tool said: {output}"}], prompt
    if knobs["tool_name"] and knobs["tool_name"] in _declared(body):
        return [{"functionCall": {"name": knobs["tool_name"], "args": knobs["tool_arguments"]}}], prompt
    text = " ".join(part["text"] for part in parts if isinstance(part.get("text"), str))
    return [{"text": knobs["reply"] if knobs["reply"] is not None else f"Echo: {text}"}], prompt


def _chunk(parts: list[dict[str, Any]], model: str, response_id: str, *, prompt: int, output: int,
           last: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    usage = {"promptTokenCount": prompt, "totalTokenCount": prompt + output,
             "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    if last:
        candidate["finishReason"] = "STOP"
        usage["candidatesTokenCount"] = output
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": response_id}


def _pieces(parts: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A stream's parts, one event each: a text in two halves (as Gemini streams a reply in pieces), a call whole."""
    if len(parts) == 1 and "text" in parts[0] and len(parts[0]["text"]) > 1:
        half = len(parts[0]["text"]) // 2
        return [[{"text": parts[0]["text"][:half]}], [{"text": parts[0]["text"][half:]}]]
    return [parts]


def route(request: Recorded, knobs: dict[str, Any]) -> tuple[str, Any]:
    """("json", a body) or ("sse", a list of event bodies) for a request; GeminiError for a refusal."""
    if knobs["key"] is not None and _key(request) != knobs["key"]:
        raise GeminiError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
    if request.method == "GET" and request.path == "/v1beta/models":
        return "json", {"models": [{"name": f"models/{name}", "version": "001", "displayName": name,
                                    "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
                                    "supportedGenerationMethods": ["generateContent", "countTokens"]}
                                   for name in knobs["models"]]}
    model, _, method = request.path.removeprefix("/v1beta/models/").rpartition(":")
    if request.method != "POST" or not request.path.startswith("/v1beta/models/") or not model:
        raise GeminiError(404, "NOT_FOUND", f"{request.method} {request.path} is not a method of this API.")
    if model not in knobs["models"]:
        raise GeminiError(404, "NOT_FOUND", f"models/{model} is not found for API version v1beta, or is not "
                                            f"supported for {method}.")
    if method == "countTokens":
        body = request.json if isinstance(request.json, dict) else {}
        request_body = body.get("generateContentRequest") or body
        return "json", {"totalTokens": answer(request_body, knobs)[1]}
    if method not in ("generateContent", "streamGenerateContent"):
        raise GeminiError(404, "NOT_FOUND", f"{method} is not a method of models.")
    parts, prompt = answer(request.json, knobs)
    response_id = uuid.uuid4().hex[:22]
    if method == "generateContent":
        return "json", _chunk(parts, model, response_id, prompt=prompt, output=len(parts), last=True)
    if parse_qs(request.query).get("alt") != ["sse"]:
        raise GeminiError(400, "INVALID_ARGUMENT", "This fake streams server-sent events only (alt=sse).")
    pieces = _pieces(parts)
    return "sse", [_chunk(piece, model, response_id, prompt=prompt, output=len(pieces), last=index == len(pieces) - 1)
                   for index, piece in enumerate(pieces)]


class GeminiApp:
    def __init__(self, state: State):
        self.state = state

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = None
        request = Recorded(scope["method"], scope["path"], scope.get("query_string", b"").decode("latin-1"),
                           {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}, data)
        with self.state.lock:
            self.state.requests.append(request)
            knobs = copy.deepcopy(self.state.knobs)
        try:
            kind, reply = route(request, knobs)
        except GeminiError as exc:
            kind, reply, status = "error", exc.body(), exc.code
        if kind == "sse":
            payload = b"".join(b"data: " + json.dumps(event).encode() + b"\r\n\r\n" for event in reply)
            content_type, status = b"text/event-stream", 200
        else:
            payload = reply if kind == "error" else json.dumps(reply).encode()
            content_type, status = b"application/json; charset=UTF-8", status if kind == "error" else 200
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", content_type), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


class FakeGemini:
    """The fake's address, knobs and request log, for a test."""

    def __init__(self, url: str, state: State):
        self.url, self.state = url, state

    def configure(self, **knobs: Any) -> FakeGemini:
        unknown = sorted(set(knobs) - DEFAULTS.keys())
        if unknown:
            raise TypeError(f"unknown fake Gemini knob(s): {', '.join(unknown)}")
        with self.state.lock:
            self.state.knobs = {**self.state.knobs, **copy.deepcopy(knobs)}
        return self

    def reset(self) -> FakeGemini:
        with self.state.lock:
            self.state.knobs = copy.deepcopy(DEFAULTS)
            self.state.requests.clear()
        return self

    @property
    def requests(self) -> list[Recorded]:
        with self.state.lock:
            return list(self.state.requests)


@contextlib.contextmanager
def fake_gemini():
    """A fake Gemini API on a free loopback port, for as long as the block runs."""
    state = State()
    with serving(GeminiApp(state), name="fake-gemini") as url:
        yield FakeGemini(url, state)
