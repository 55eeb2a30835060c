"""Taking in an event (a webhook call, an e-mail): checks 2 to 8 of spec 4.7, in that order.

Check 1 (the installation's switch) and the per-address ceiling belong to the webhook view; the
e-mail path comes here directly. An accepted event is stored with a queued run in one
transaction, before the answer; the run's task is enqueued when that transaction commits."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gateway.counters import mark_once, unmark, window_hit
from routines.models import Event, Routine
from routines.runs import queue_run
from routines.signatures import (STANDARD_BAD_TIMESTAMP, STANDARD_OK, STANDARD_TOLERANCE_SECONDS, signature_valid,
                                  standard_check)

EVENT_ID_HEADERS = ("x-event-id", "x-request-id", "x-delivery-id", "x-repo-delivery")
EVENT_ID_FIELDS = ("id", "event_id", "uuid")
EVENT_ID_MAX = 200  # longer ids are kept as their SHA-256
RATE_WINDOW_SECONDS = 60
PENDING_SECONDS = 30  # how long a delivery being stored holds its id against a concurrent one
# A Standard Webhooks delivery is accepted while its timestamp is within the tolerance of the
# clock, either way: for as long as a replay of it could be accepted, its id must still be seen.
STANDARD_SEEN_SECONDS = 2 * STANDARD_TOLERANCE_SECONDS + 1
BAD_SIGNATURE = {"error": "unauthorized",
                 "message": "The signature is missing or wrong: send the HMAC-SHA256 of the exact body, "
                            "in hex, in X-Svc-Signature (or X-Hub-Signature-256)."}
BAD_STANDARD_SIGNATURE = {
    "error": "unauthorized",
    "message": "The signature is missing or wrong: this routine takes Standard Webhooks signatures, "
               "headers webhook-id, webhook-timestamp (Unix seconds) and webhook-signature "
               "(v1,<base64 HMAC-SHA256 of \"id.timestamp.body\">)."}
BAD_STANDARD_TIMESTAMP = {
    "error": "unauthorized",
    "message": f"The webhook-timestamp is more than {STANDARD_TOLERANCE_SECONDS} seconds away from the "
               "server's clock: sign each delivery when it is sent (a delivery sent again is refused)."}


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
    standard = routine.webhook_signature_scheme == Routine.SignatureScheme.STANDARD
    if verify_signature and routine.webhook_secret:  # 5
        if standard:
            outcome = standard_check(routine.webhook_secret, body, lower)
            if outcome != STANDARD_OK:
                return 401, dict(BAD_STANDARD_TIMESTAMP if outcome == STANDARD_BAD_TIMESTAMP
                                 else BAD_STANDARD_SIGNATURE)
        elif not signature_valid(routine.webhook_secret, body, lower):
            return 401, dict(BAD_SIGNATURE)
    parsed = _json_of(body)
    if event_id is None and standard:  # the Standard Webhooks id comes before spec 6.1's sources
        event_id = (lower.get("webhook-id") or "").strip() or None
    event_id = _bounded(_storable(event_id or event_id_of(lower, parsed, body)))
    # 6: the stored events decide (a mark set before the event is stored would, if the process
    # died in between, answer every retry "duplicate" and lose the event). A short mark serializes
    # deliveries of the same id arriving together; it ends by itself if nothing is stored.
    window = settings.WEBHOOK_DUPLICATE_WINDOW_SECONDS
    if standard:  # never shorter than the time a replay's timestamp stays acceptable
        window = max(window, STANDARD_SEEN_SECONDS)
    pending_key = f"hook-pending:{routine.pk}:{hashlib.sha256(event_id.encode('utf-8')).hexdigest()}"
    duplicate = {"ok": True, "ignored": "duplicate", "event_id": event_id}
    if not mark_once(pending_key, min(PENDING_SECONDS, window)):
        return 200, duplicate
    since = timezone.now() - timedelta(seconds=window)
    if Event.objects.filter(routine=routine, event_id=event_id, received_at__gt=since).exists():
        unmark(pending_key)
        return 200, duplicate
    rate = window_hit([(f"routine:{routine.pk}:events", settings.WEBHOOK_EVENTS_PER_MINUTE)], RATE_WINDOW_SECONDS)
    if not rate.allowed:  # 7: not remembered as seen
        unmark(pending_key)
        return 200, {"ok": True, "ignored": "rate_limited"}
    try:  # 8
        with transaction.atomic():
            event = Event.objects.create(routine=routine, event_id=event_id, source=source,
                                         content_type=(lower.get("content-type") or "")[:200],
                                         body=event_text(body, parsed))
            queue_run(routine, trigger=source, event=event)
    except Exception:
        unmark(pending_key)
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
        text = json.dumps(parsed, indent=2, ensure_ascii=False)
        # a lone surrogate (JSON "\ud800") cannot be stored as UTF-8: such a body stays escaped
        return text if _storable(text) is text else json.dumps(parsed, indent=2)
    return body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def _json_of(body: bytes):
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _storable(text: str) -> str:
    """`text` itself when it can be stored (UTF-8, no NUL); otherwise with lone surrogates and
    NUL written as their escapes (an id from a JSON body may hold either)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00") if "\x00" in text else text


def _bounded(event_id: str) -> str:
    if len(event_id) <= EVENT_ID_MAX:
        return event_id
    return "sha256:" + hashlib.sha256(event_id.encode("utf-8")).hexdigest()
