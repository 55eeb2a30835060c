"""Taking in an event (a webhook call, an e-mail): checks 2 to 8 of spec 4.7, in that order.

Check 1 (the installation's switch) and the per-address ceiling belong to the webhook view; the
e-mail path comes here directly. An accepted event is stored with a queued run in one
transaction, before the answer; the run's task is enqueued when that transaction commits."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gateway.state.counters import hits_many, marks_many, unmark
from routines.models import Event, Routine
from routines.refused_events import keep as keep_refused
from routines.refused_events import refusal
from routines.run_start import queue_runs
from routines.signatures import (
    STANDARD_BAD_TIMESTAMP,
    STANDARD_OK,
    STANDARD_TOLERANCE_SECONDS,
    signature_valid,
    standard_check,
)

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


@dataclass(frozen=True)
class Incoming:
    """One event to take in: the routine's token, the body and headers as received."""

    token: str
    body: bytes
    headers: Mapping[str, str]
    source: str = "webhook"
    event_id: str | None = None
    verify_signature: bool = True


@dataclass(frozen=True)
class _Checked:
    """An event that passed checks 2 to 5, on its way through 6 to 8."""

    routine: Routine
    item: Incoming
    event_id: str
    window: int  # seconds an event id is remembered (check 6)
    pending_key: str
    content_type: str
    text: str  # the body as the routine sees it

    @property
    def duplicate(self) -> dict:
        return {"ok": True, "ignored": "duplicate", "event_id": self.event_id}


def ingest(token: str, body: bytes, headers: Mapping[str, str], *, source: str = "webhook",
           event_id: str | None = None, verify_signature: bool = True) -> tuple[int, dict]:
    """The answer `(status, body)` to one event for the routine whose token is `token`."""
    return ingest_many([Incoming(token, body, headers, source, event_id, verify_signature)])[0]


def ingest_many(items: list[Incoming], *, then: Callable[..., None] | None = None) -> list[tuple[int, dict]]:
    """The answers to several events, in their order, each as `ingest` would give it alone, with
    the work done once for all of them: one query for their routines, one Redis round trip for
    their duplicate marks (6), one query for the stored duplicates, one round trip for their
    routines' ceilings (7), one transaction for the accepted ones (8). The webhook view takes in
    the events that arrive together this way (routines/intake.py), and enqueues their runs itself
    after answering (`then`: given the run ids once they are committed)."""
    answers: list[tuple[int, dict] | None] = [None] * len(items)
    tokens = {item.token for item in items if item.token}
    routines = {r.webhook_token: r for r in Routine.objects.filter(webhook_token__in=tokens)} if tokens else {}
    pending: list[tuple[int, _Checked]] = []
    refused = []
    for index, item in enumerate(items):
        routine = routines.get(item.token) if item.token else None
        outcome = _checks_2_to_5(item, routine)
        if isinstance(outcome, _Checked):
            pending.append((index, outcome))
        else:
            answers[index] = outcome
            if outcome[0] == 401:  # shown on the routine's page (routines/refused_events.py)
                refused.append(refusal(routine, item.body, item.headers, stale=outcome[1] == BAD_STANDARD_TIMESTAMP))
    keep_refused(refused)
    # 6: the stored events decide (a mark set before the event is stored would, if the process
    # died in between, answer every retry "duplicate" and lose the event). A short mark serializes
    # deliveries of the same id arriving together; it ends by itself if nothing is stored.
    marked = marks_many([(c.pending_key, min(PENDING_SECONDS, c.window)) for _, c in pending])
    for (index, checked), fresh in zip(pending, marked):
        if not fresh:
            answers[index] = (200, checked.duplicate)
    pending = [(index, c) for (index, c), fresh in zip(pending, marked) if fresh]
    try:  # until stored, a failure must not leave a mark that answers the sender's retry "duplicate"
        accepted = _settle_6_and_7(pending, answers)
        if accepted:  # 8
            with transaction.atomic():
                events = Event.objects.bulk_create([
                    Event(routine=c.routine, event_id=c.event_id, source=c.item.source, content_type=c.content_type,
                          body=c.text) for _, c in accepted])
                queue_runs([(c.routine, c.item.source, event) for (_, c), event in zip(accepted, events)],
                           then=then)
    except Exception:
        unmark(*[c.pending_key for index, c in pending if answers[index] is None])
        raise
    for index, checked in accepted:
        answers[index] = (200, {"ok": True, "queued": True, "event_id": checked.event_id})
    return answers


def _settle_6_and_7(pending: list[tuple[int, _Checked]], answers: list) -> list[tuple[int, _Checked]]:
    """Answer the marked events already stored (6) or over their routine's ceiling (7), removing
    their marks; the others are to be stored."""
    stored = _stored_ids([c for _, c in pending])
    seen = [(index, c) for index, c in pending if (c.routine.pk, c.event_id) in stored]
    unmark(*[c.pending_key for _, c in seen])
    for index, checked in seen:
        answers[index] = (200, checked.duplicate)
    pending = [(index, c) for index, c in pending if (c.routine.pk, c.event_id) not in stored]
    rates = hits_many([([(f"routine:{c.routine.pk}:events", settings.WEBHOOK_EVENTS_PER_MINUTE)], RATE_WINDOW_SECONDS)
                       for _, c in pending])
    unmark(*[c.pending_key for (_, c), rate in zip(pending, rates) if not rate.allowed])
    for (index, _), rate in zip(pending, rates):
        if not rate.allowed:  # 7: not remembered as seen
            answers[index] = (200, {"ok": True, "ignored": "rate_limited"})
    return [(index, c) for (index, c), rate in zip(pending, rates) if rate.allowed]


def _checks_2_to_5(item: Incoming, routine: Routine | None) -> tuple[int, dict] | _Checked:
    if routine is None:  # 2
        return 404, {"error": "not_found", "message": "No routine has this webhook token."}
    if not routine.is_enabled:  # 3
        return 200, {"ok": True, "ignored": "disabled_routine"}
    limit, body = settings.WEBHOOK_MAX_BODY_BYTES, item.body
    if len(body) > limit:  # 4
        return 413, {"error": "payload_too_large", "message": f"The body is larger than {limit} bytes.",
                     "max_bytes": limit}
    lower = {name.lower(): value for name, value in item.headers.items()}
    standard = routine.webhook_signature_scheme == Routine.SignatureScheme.STANDARD
    if item.verify_signature and routine.webhook_secret:  # 5
        if standard:
            outcome = standard_check(routine.webhook_secret, body, lower)
            if outcome != STANDARD_OK:
                return 401, dict(BAD_STANDARD_TIMESTAMP if outcome == STANDARD_BAD_TIMESTAMP
                                 else BAD_STANDARD_SIGNATURE)
        elif not signature_valid(routine.webhook_secret, body, lower):
            return 401, dict(BAD_SIGNATURE)
    parsed = _json_of(body)
    event_id = item.event_id
    if event_id is None and standard:  # the Standard Webhooks id comes before spec 6.1's sources
        event_id = (lower.get("webhook-id") or "").strip() or None
    event_id = _bounded(_storable(event_id or event_id_of(lower, parsed, body)))
    window = settings.WEBHOOK_DUPLICATE_WINDOW_SECONDS
    if standard:  # never shorter than the time a replay's timestamp stays acceptable
        window = max(window, STANDARD_SEEN_SECONDS)
    pending_key = f"hook-pending:{routine.pk}:{hashlib.sha256(event_id.encode('utf-8')).hexdigest()}"
    return _Checked(routine, item, event_id, window, pending_key, (lower.get("content-type") or "")[:200],
                    event_text(body, parsed))


def _stored_ids(checked: list[_Checked]) -> set[tuple[int, str]]:
    """(routine, event id) of the events already stored within each one's window: one query."""
    if not checked:
        return set()
    now = timezone.now()
    since = {(c.routine.pk, c.event_id): now - timedelta(seconds=c.window) for c in checked}
    rows = Event.objects.filter(
        routine_id__in={c.routine.pk for c in checked}, event_id__in={c.event_id for c in checked},
        received_at__gt=min(since.values()),
    ).values_list("routine_id", "event_id", "received_at")
    return {(routine_id, event_id) for routine_id, event_id, at in rows
            if (routine_id, event_id) in since and at > since[(routine_id, event_id)]}


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
        text = pretty_json(parsed, ensure_ascii=False)
        # a lone surrogate (JSON "\ud800") cannot be stored as UTF-8: such a body stays escaped
        return text if _storable(text) is text else pretty_json(parsed, ensure_ascii=True)
    return body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def pretty_json(value, *, ensure_ascii: bool, indent: str = "") -> str:
    """`json.dumps(value, indent=2, ensure_ascii=...)` of what `json.loads` gives, character for
    character, without the json module's Python encoder (the one `indent` takes): its closures
    make reference cycles on every call, garbage for the cyclic collector, whose pauses are what
    a server's p99 is made of (bench/README.md). Scalars go through the C encoder."""
    if isinstance(value, dict | list) and value:
        inner = indent + "  "
        if isinstance(value, dict):
            items = [f"{inner}{json.dumps(key, ensure_ascii=ensure_ascii)}: "
                     f"{pretty_json(item, ensure_ascii=ensure_ascii, indent=inner)}" for key, item in value.items()]
            return "{\n" + ",\n".join(items) + "\n" + indent + "}"
        items = [inner + pretty_json(item, ensure_ascii=ensure_ascii, indent=inner) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=ensure_ascii)


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
