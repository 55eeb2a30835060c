"""The operator's own guard over HTTP. The gateway POSTs JSON
`{"direction": "input" | "output", "group": name, "request_id": id, "texts": [...]}`, signed as the
gateway's outbound webhooks are (`X-Svc-Signature: sha256=<hex HMAC-SHA256 of the body>`, when the
check has a secret), and reads a 200 answer
`{"action": "allow" | "block" | "redact", "texts": [...], "reason": "..."}` (`texts`, as many as sent,
for redact). Any other status, an answer that does not parse so, a connection error or the
check's timeout is a `GuardFailure`, and the check's fail mode decides.

One httpx client per event loop, kept: a guard is asked on every call of its group, and a new
client would build its TLS context each time."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import weakref
from dataclasses import dataclass

import httpx

from gateway.guard.findings import GuardFailure
from gateway.guard.policy import Check

_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None or found.is_closed:
        found = _clients[loop] = httpx.AsyncClient(follow_redirects=False, trust_env=False)
    return found


@dataclass(frozen=True)
class Answer:
    action: str  # allow, block or redact
    texts: list[str] | None  # for redact
    reason: str  # the guard's own words, for the log only


def read_answer(response: httpx.Response, sent: int) -> Answer:
    if response.status_code != 200:
        raise GuardFailure(f"the guard webhook answered {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        raise GuardFailure("the guard webhook's answer is not JSON") from None
    action = data.get("action") if isinstance(data, dict) else None
    if action not in ("allow", "block", "redact"):
        raise GuardFailure("the guard webhook's answer has no action among allow, block, redact")
    texts = data.get("texts")
    if action == "redact" and not (isinstance(texts, list) and len(texts) == sent
                                   and all(isinstance(t, str) for t in texts)):
        raise GuardFailure(f"the guard webhook's redact answer does not hold {sent} texts")
    reason = data.get("reason")
    return Answer(action, texts if action == "redact" else None, reason if isinstance(reason, str) else "")


async def ask(check: Check, *, direction: str, group: str, request_id: str, texts: list[str]) -> Answer:
    body = json.dumps({"direction": direction, "group": group, "request_id": request_id, "texts": texts},
                      ensure_ascii=False).encode()
    headers = {"Content-Type": "application/json"}
    if check.secret:
        headers["X-Svc-Signature"] = sign(check.secret, body)
    try:
        response = await asyncio.wait_for(client().post(check.url, content=body, headers=headers,
                                                        timeout=check.timeout), check.timeout)
    except (asyncio.TimeoutError, httpx.TimeoutException):
        raise GuardFailure(f"the guard webhook gave no answer within {check.timeout:g}s") from None
    except httpx.HTTPError as error:
        raise GuardFailure(f"the guard webhook could not be reached: {type(error).__name__}") from None
    return read_answer(response, len(texts))
