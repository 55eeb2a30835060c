"""`telegram`: the run's text to the Telegram chat the owner linked, through the Bot API's
`sendMessage` (`{TELEGRAM_API_BASE}/bot{TELEGRAM_BOT_TOKEN}/sendMessage`).

Texts longer than Telegram's 4096 characters go as several messages, split at a line break when
there is one. The bot token is part of the URL: it never appears in an error or a log line.
"""

from __future__ import annotations

from django.conf import settings

from routines.deliveries.base import DeliveryFailed, post_to_provider
from routines.linked_channels import telegram_chat_id

MAX_CHARS = 4096


def send(run, target: str, text: str) -> None:
    chat_id = telegram_chat_id(run.routine.account)
    if chat_id is None:
        raise DeliveryFailed("No Telegram chat is linked to this account; link one first.")
    for part in split_text(text or "(empty output)", MAX_CHARS):
        send_message(chat_id, part)


def configured() -> bool:
    return bool(settings.TELEGRAM_BOT_TOKEN)


def send_message(chat_id: str, text: str) -> None:
    """One `sendMessage` call; DeliveryFailed (retryable on 429, 5xx and network errors)."""
    if not configured():
        raise DeliveryFailed("Telegram is not configured on this gateway (TELEGRAM_BOT_TOKEN is empty).")
    url = f"{settings.TELEGRAM_API_BASE.rstrip('/')}/bot{settings.TELEGRAM_BOT_TOKEN}/sendMessage"
    post_to_provider("Telegram", url, {"chat_id": chat_id, "text": text},
                     describe=lambda answer: answer.get("description"))


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut at the last line break (else space) that fits,
    which is dropped; a piece without either is cut at `limit`."""
    parts = []
    while len(text) > limit:
        cut = text.rfind("\n", 1, limit + 1)
        if cut < 1:
            cut = text.rfind(" ", 1, limit + 1)
        if cut < 1:
            parts.append(text[:limit])
            text = text[limit:]
        else:
            parts.append(text[:cut])
            text = text[cut + 1:]
    parts.append(text)
    return [part for part in parts if part.strip()]  # Telegram refuses a blank message

