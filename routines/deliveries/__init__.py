"""Delivering a run's result to its targets, one small module per kind of target.

`deliver(run, target, text)` sends once per try through the kind's `send(run, target, text)`,
retrying a retryable failure (5xx, timeout) with exponential backoff up to
DELIVERY_RETRY_ATTEMPTS tries. It returns the tries made and the last error ("" on success)."""

from __future__ import annotations

import importlib
import logging
import time

from django.conf import settings

from routines.deliveries.base import DeliveryFailed
from routines.targets import parse_target

log = logging.getLogger(__name__)

MODULES = {
    "inapp": "routines.deliveries.inapp",
    "email": "routines.deliveries.email",
    "webhook": "routines.deliveries.webhook",
    "telegram": "routines.deliveries.telegram",
    "whatsapp": "routines.deliveries.whatsapp",
}


def sender_for(target: str):
    """The `send` function of the target's kind (imported on first use)."""
    try:
        kind = parse_target(target).kind
    except ValueError as exc:
        raise DeliveryFailed(f"Not a delivery target: {exc}.") from None
    return importlib.import_module(MODULES[kind]).send


def deliver(run, target: str, text: str) -> tuple[int, str]:
    attempts = max(settings.DELIVERY_RETRY_ATTEMPTS, 1)
    tries = 0
    while True:
        tries += 1
        try:
            sender_for(target)(run, target, text)
            return tries, ""
        except DeliveryFailed as failure:
            if not failure.retryable or tries >= attempts:
                return tries, failure.message
            wait = settings.DELIVERY_RETRY_BACKOFF_SECONDS * (2 ** (tries - 1))
            log.info("delivery of run %s to a %s target failed (%s); retrying in %.2fs",
                     run.pk, target.partition(":")[0], failure.message, wait)
            time.sleep(wait)
        except Exception as exc:  # a bug or an unexpected library error: the run records it
            log.exception("delivery of run %s failed unexpectedly", run.pk)
            return tries, f"Unexpected error: {exc.__class__.__name__}"
