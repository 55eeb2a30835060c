"""Linked channels: the Telegram chat and WhatsApp numbers an account may deliver to.

- Telegram: the account asks for a deep link `https://t.me/<bot>?start=<code>`; pressing Start in
  Telegram sends `/start <code>` to the bot, whose update (posted to our secret webhook) links that
  chat to the account. One chat per account; linking another replaces it.
- WhatsApp: the account names a number; a 6-digit code goes to it through the Cloud API; sending
  the code back confirms the number.

Codes are stored only as HMACs under SECRET_KEY, work once, expire after CHANNEL_CODE_TTL_SECONDS,
and a WhatsApp code takes CHANNEL_CODE_MAX_ATTEMPTS wrong tries at most.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from gateway.web.errors import ApiError, ValidationFailed
from gateway.web.output import timestamp
from routines.deliveries import telegram, whatsapp
from routines.deliveries.base import DeliveryFailed

# the readers live in routines/linked_channels.py (deliveries need them, and this module needs deliveries)
from routines.linked_channels import TELEGRAM, WHATSAPP
from routines.models import LinkedChannel

log = logging.getLogger(__name__)

START = re.compile(r"^/start(?:@\w+)?\s+([A-Za-z0-9_-]{1,64})\s*$")
CODE_DIGITS = 6

LINKED_REPLY = ("This chat is now linked to your gateway account. Routines with the telegram delivery "
                "target will post their results here.")
EXPIRED_REPLY = "This link has expired or was already used. Ask your gateway account for a new one."
HELP_REPLY = "To link this chat, open the link your gateway account gives you for Telegram."


# --- Reading -------------------------------------------------------------------------------

def channel_list(*, account) -> list[LinkedChannel]:
    return list(LinkedChannel.objects.filter(account=account).order_by("id"))


def channel_record(channel: LinkedChannel) -> dict:
    return {
        "id": channel.pk,
        "kind": channel.kind,
        "address": channel.address or None,
        "verified": channel.verified_at is not None,
        "verified_at": timestamp(channel.verified_at),
        "created_at": timestamp(channel.created_at),
    }


def channel_delete(*, account, channel_id: int) -> None:
    deleted, _ = LinkedChannel.objects.filter(account=account, pk=channel_id).delete()
    if not deleted:
        raise ApiError(404, "Channel not found.", code="not_found")


# --- Telegram ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TelegramLink:
    link: str
    expires_at: datetime


def telegram_link_create(*, account) -> TelegramLink:
    """A one-time deep link for the account's Telegram chat (a new one replaces an unused one)."""
    if not (telegram.configured() and settings.TELEGRAM_BOT_USERNAME):
        raise ApiError(501, "Telegram is not set up on this gateway.", code="not_configured")
    code = secrets.token_urlsafe(24)  # 32 characters of A-Z a-z 0-9 _ -, as Telegram's start parameter allows
    expires_at = timezone.now() + timedelta(seconds=settings.CHANNEL_CODE_TTL_SECONDS)
    LinkedChannel.objects.update_or_create(
        account=account, kind=TELEGRAM, address="",
        defaults={"code_hash": _code_hash(TELEGRAM, code), "code_expires_at": expires_at, "code_attempts": 0,
                  "verified_at": None},
    )
    username = settings.TELEGRAM_BOT_USERNAME.lstrip("@")
    return TelegramLink(link=f"https://t.me/{username}?start={code}", expires_at=expires_at)


def telegram_secret_matches(secret: str) -> bool:
    expected = settings.TELEGRAM_WEBHOOK_SECRET
    return bool(expected) and hmac.compare_digest(secret.encode(), expected.encode())


def telegram_update_handle(update: dict) -> None:
    """One Bot API update. `/start <code>` from a chat links it to the account whose code it is;
    the chat is told how it went. Other updates are ignored."""
    message = update.get("message") if isinstance(update, dict) else None
    if not isinstance(message, dict):
        return
    chat = message.get("chat")
    text = message.get("text")
    if not isinstance(chat, dict) or not isinstance(text, str) or not isinstance(chat.get("id"), int):
        return
    chat_id = str(chat["id"])
    if not text.startswith("/start"):
        return
    match = START.match(text)
    if match is None:
        reply = HELP_REPLY
    else:
        reply = LINKED_REPLY if _telegram_link(match.group(1), chat_id) else EXPIRED_REPLY
    try:
        telegram.send_message(chat_id, reply)
    except DeliveryFailed as exc:
        log.warning("could not answer Telegram chat %s: %s", chat_id, exc.message)


def _telegram_link(code: str, chat_id: str) -> bool:
    now = timezone.now()
    with transaction.atomic():
        pending = (LinkedChannel.objects.select_for_update()
                   .filter(kind=TELEGRAM, address="", code_hash=_code_hash(TELEGRAM, code), code_expires_at__gt=now)
                   .first())
        if pending is None:
            return False
        LinkedChannel.objects.filter(account_id=pending.account_id, kind=TELEGRAM).exclude(pk=pending.pk).delete()
        pending.address, pending.verified_at = chat_id, now
        pending.code_hash, pending.code_expires_at, pending.code_attempts = "", None, 0
        pending.save(update_fields=["address", "verified_at", "code_hash", "code_expires_at", "code_attempts"])
    return True


# --- WhatsApp ------------------------------------------------------------------------------

def whatsapp_code_send(*, account, number: str) -> LinkedChannel:
    """Send a confirmation code to `number` (E.164) for `account`."""
    if not whatsapp.configured():
        raise ApiError(501, "WhatsApp is not set up on this gateway.", code="not_configured")
    now = timezone.now()
    code = f"{secrets.randbelow(10 ** CODE_DIGITS):0{CODE_DIGITS}d}"
    with transaction.atomic():
        channel = (LinkedChannel.objects.select_for_update()
                   .filter(account=account, kind=WHATSAPP, address=number).first())
        if channel is None:
            others = LinkedChannel.objects.filter(account=account, kind=WHATSAPP).count()
            if others >= settings.WHATSAPP_NUMBERS_PER_ACCOUNT:
                raise ApiError(403, f"An account may link at most {settings.WHATSAPP_NUMBERS_PER_ACCOUNT} "
                                    "WhatsApp numbers; remove one first.", code="channel_limit")
            try:
                with transaction.atomic():
                    channel = LinkedChannel.objects.create(account=account, kind=WHATSAPP, address=number)
            except IntegrityError:  # the same number, asked for twice at once
                channel = LinkedChannel.objects.select_for_update().get(account=account, kind=WHATSAPP, address=number)
        if channel.verified_at is not None:
            raise ValidationFailed({"number": ["This number is already linked to your account."]})
        wait = _resend_wait(channel, now)
        if wait:
            raise ValidationFailed({"number": [f"A code was sent to this number moments ago; ask again in {wait} s."]})
        channel.code_hash = _code_hash(WHATSAPP, code, channel.pk)
        channel.code_expires_at = now + timedelta(seconds=settings.CHANNEL_CODE_TTL_SECONDS)
        channel.code_attempts = 0
        channel.save(update_fields=["code_hash", "code_expires_at", "code_attempts"])
    try:
        whatsapp.send_code(number, code)
    except DeliveryFailed as exc:
        unsent = LinkedChannel.objects.filter(pk=channel.pk, code_hash=channel.code_hash)
        unsent.update(code_hash="", code_expires_at=None)  # so a new code may be asked for at once
        raise ApiError(502, f"The code could not be sent: {exc.message}", code="provider_failed") from None
    return channel


def whatsapp_verify(*, account, number: str, code: str) -> LinkedChannel:
    """Confirm `number` with the code sent to it. A wrong code counts against the code's tries."""
    now = timezone.now()
    refusal = None
    with transaction.atomic():
        channel = (LinkedChannel.objects.select_for_update()
                   .filter(account=account, kind=WHATSAPP, address=number).first())
        if channel is None:
            raise ValidationFailed({"number": ["No code was sent to this number; ask for one first."]})
        if channel.verified_at is not None:
            return channel
        if not channel.code_hash:
            raise ValidationFailed({"code": ["No code is waiting for this number; ask for a new one."]})
        if channel.code_expires_at is None or channel.code_expires_at <= now:
            refusal = "The code has expired; ask for a new one."
        elif channel.code_attempts >= settings.CHANNEL_CODE_MAX_ATTEMPTS:
            refusal = "Too many wrong codes; ask for a new one."
        elif not hmac.compare_digest(channel.code_hash, _code_hash(WHATSAPP, code, channel.pk)):
            channel.code_attempts += 1
            channel.save(update_fields=["code_attempts"])
            refusal = "The code is wrong."
        else:
            channel.verified_at = now
            channel.code_hash, channel.code_expires_at, channel.code_attempts = "", None, 0
            channel.save(update_fields=["verified_at", "code_hash", "code_expires_at", "code_attempts"])
    if refusal:
        raise ValidationFailed({"code": [refusal]})
    return channel


def _resend_wait(channel: LinkedChannel, now: datetime) -> int:
    """Seconds before another code may go to this channel's number (0: now)."""
    if not channel.code_hash or channel.code_expires_at is None:
        return 0
    sent_at = channel.code_expires_at - timedelta(seconds=settings.CHANNEL_CODE_TTL_SECONDS)
    left = (sent_at + timedelta(seconds=settings.CHANNEL_CODE_RESEND_SECONDS) - now).total_seconds()
    return max(int(left + 0.999), 0)


def _code_hash(kind: str, code: str, channel_id: int | None = None) -> str:
    message = f"channel-code:{kind}:{channel_id or ''}:{code}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()
