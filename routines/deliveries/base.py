"""What every delivery module shares: `send(run, target, text) -> None`, raising DeliveryFailed."""

from __future__ import annotations

from typing import Any, Callable

import httpx
from django.conf import settings

from gateway.telemetry.redact import configured_secrets, redact


def scrubbed(text: str, routine=None) -> str:
    """An error text fit to store and show (a run's or a delivery's `error`, seen in the API, the
    inbox and the admin): without the credentials this process holds (model server keys, channel
    tokens), the routine's own signing secret, or anything shaped like a credential."""
    return redact(text, [*configured_secrets(), getattr(routine, "webhook_secret", None)])


class DeliveryFailed(Exception):
    """A target could not be reached. `retryable`: a later try may succeed (5xx, timeout)."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


def post_to_provider(provider: str, url: str, body: dict[str, Any], *, headers: dict[str, str] | None = None,
                     describe: Callable[[Any], Any]) -> None:
    """POST `body` as JSON to a provider's HTTP API; any answer but 200 raises DeliveryFailed,
    retryable on 429, 5xx and network errors. `describe(parsed JSON)` picks the provider's own
    explanation for the message. The URL and headers (which carry tokens) never appear in it."""
    try:
        response = httpx.post(url, json=body, headers=headers, timeout=settings.DELIVERY_TIMEOUT_SECONDS)
    except httpx.HTTPError as exc:
        raise DeliveryFailed(f"{provider} could not be reached ({type(exc).__name__}).", retryable=True) from None
    if response.status_code == 200:
        return
    try:
        explanation = describe(response.json())
    except (ValueError, AttributeError, TypeError):
        explanation = None
    raise DeliveryFailed(
        f"{provider} answered {response.status_code}: {str(explanation)[:300] if explanation else 'no description'}",
        retryable=response.status_code == 429 or response.status_code >= 500,
    )
