"""Taking in an event (a webhook call, an e-mail): checks 2 to 8 of spec 4.7, in that order.

Check 1 (the installation's switch) and the per-address ceiling belong to the webhook view; the
e-mail path comes here directly. An accepted event is stored with a queued run in one
transaction, before the answer; the run's task is enqueued when that transaction commits."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from django.conf import settings
from django.db import transaction

from gateway.counters import mark_once, unmark, window_hit
from routines.models import Event, Routine
from routines.runs import queue_run
from routines.signatures import signature_valid

EVENT_ID_HEADERS = ("x-event-id", "x-request-id", "x-delivery-id", "x-repo-delivery")
EVENT_ID_FIELDS = ("id", "event_id", "uuid")
EVENT_ID_MAX = 200  # longer ids are kept as their SHA-256
RATE_WINDOW_SECONDS = 60


def ingest(token: str, body: bytes, headers: Mapping[str, str], *, source: str = "webhook",
           event_id: str | None = None, verify_signature: bool = True) -> tuple[int, dict]:
    """The answer `(status, body)` to one event for the routine whose token is `token`."""
    routine = Routine.objects.filter(webhook_token=token).first() if token else None
    if routine is None:  # 2
        return 404, {"error": "not_found", "message": "No routine has this webhook token."}
    if not routine.is_enabled:  # 3
        return 200, {"ok": True, "ignored": "disabled_routine"}
    limit = settings.WEBHOOK_MAX_BODY_BYTES
    if len(body) > limit:  # 4
        return 413, {"error": "payload_too_large", "message": f"The body is larger than {limit} bytes.",
                     "max_bytes": limit}
    lower = {name.lower(): value for name, value in headers.items()}
    if verify_signature and routine.webhook_secret and not signature_valid(routine.webhook_secret, body, lower):  # 5
        return 401, {"error": "unauthorized",
                     "message": "The signature is missing or wrong: send the HMAC-SHA256 of the exact body, "
                                "in hex, in X-Svc-Signature (or X-Hub-Signature-256)."}
    parsed = _json_of(body)
    event_id = _bounded(event_id or event_id_of(lower, parsed, body))
    seen_key = f"hook-seen:{routine.pk}:{hashlib.sha256(event_id.encode('utf-8', 'replace')).hexdigest()}"
    if not mark_once(seen_key, settings.WEBHOOK_DUPLICATE_WINDOW_SECONDS):  # 6
        return 200, {"ok": True, "ignored": "duplicate", "event_id": event_id}
    rate = window_hit([(f"routine:{routine.pk}:events", settings.WEBHOOK_EVENTS_PER_MINUTE)], RATE_WINDOW_SECONDS)
    if not rate.allowed:  # 7: not remembered as seen
        unmark(seen_key)
        return 200, {"ok": True, "ignored": "rate_limited"}
    try:  # 8
        with transaction.atomic():
            event = Event.objects.create(routine=routine, event_id=event_id, source=source,
                                         content_type=(lower.get("content-type") or "")[:200],
                                         body=event_text(body, parsed))
            queue_run(routine, trigger=source, event=event)
    except Exception:
        unmark(seen_key)
        raise
    return 200, {"ok": True, "queued": True, "event_id": event_id}


def event_id_of(headers: Mapping[str, str], parsed, body: bytes) -> str:
    """Spec 6.1: the first of the id headers the caller sent, then `id`, `event_id` or `uuid` of
    a JSON object body, otherwise the SHA-256 of the body. `headers` has lowercase names."""
    for name in EVENT_ID_HEADERS:
        value = (headers.get(name) or "").strip()
        if value:
            return value
    if isinstance(parsed, dict):
        for name in EVENT_ID_FIELDS:
            value = parsed.get(name)
            if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
                continue
            if str(value).strip():
                return str(value).strip()
    return hashlib.sha256(body).hexdigest()


def event_text(body: bytes, parsed=None) -> str:
    """The body as the routine sees it: JSON pretty-printed, anything else as text, "" for a ping."""
    if parsed is None:
        parsed = _json_of(body)
    if isinstance(parsed, (dict, list)):
        return json.dumps(parsed, indent=2, ensure_ascii=False)
    return body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def _json_of(body: bytes):
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _bounded(event_id: str) -> str:
    if len(event_id) <= EVENT_ID_MAX:
        return event_id
    return "sha256:" + hashlib.sha256(event_id.encode("utf-8", "replace")).hexdigest()
