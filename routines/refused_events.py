"""Webhook events refused for their signature, kept for the routine's console page.

A sender whose signatures are wrong (another secret, a re-serialized body, the wrong header) saw
its 401 but the operator saw nothing. The refusals are now written with the batch they came in
(routines/ingest.py), at most `KEPT` per routine: a flood of forged calls (already bounded by
the per-address limit) replaces old rows instead of filling the database."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping

from django.db import transaction

from routines.models import RefusedEvent, Routine

log = logging.getLogger("routines.runs")

KEPT = 20  # per routine, the newest
SIGNATURE_HEADERS = ("x-svc-signature", "x-hub-signature-256", "webhook-id", "webhook-timestamp",
                     "webhook-signature")


def refusal(routine: Routine, body: bytes, headers: Mapping[str, str], *, stale: bool = False) -> RefusedEvent:
    """The row for one refused event; `stale`: a Standard Webhooks timestamp out of tolerance."""
    headers = {name.lower(): value for name, value in headers.items()}
    sent = [name for name in SIGNATURE_HEADERS if (headers.get(name) or "").strip()]
    if stale:
        reason = "timestamp too far from the server's clock"
    elif not sent:
        reason = "no signature header"
    else:
        reason = "signature wrong"
    return RefusedEvent(routine=routine, reason=reason, signature_headers=", ".join(sent),
                        content_type=(headers.get("content-type") or "")[:200], body_bytes=len(body),
                        body_sha256=hashlib.sha256(body).hexdigest())


def keep(refused: list[RefusedEvent]) -> None:
    """Write the refusals, then drop each routine's beyond the newest KEPT. Never raises: the
    sender's 401 does not depend on it."""
    if not refused:
        return
    try:
        with transaction.atomic():
            RefusedEvent.objects.bulk_create(refused)
            for routine_id in {r.routine_id for r in refused}:
                old = list(RefusedEvent.objects.filter(routine_id=routine_id).order_by("-id")
                           .values_list("id", flat=True)[KEPT:])
                if old:
                    RefusedEvent.objects.filter(id__in=old).delete()
    except Exception:
        log.exception("could not keep %d refused webhook event(s)", len(refused))
