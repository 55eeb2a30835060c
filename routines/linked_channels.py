"""Which channels an account has verified: the reading side of linked channels.

Deliveries read it (the Telegram chat to post to, whether a WhatsApp number is confirmed), targets
read it (a routine may not name an unlinked channel), and the linking in routines/channels.py reads
it too. It lives apart from the linking because the linking sends its codes and replies through
routines/deliveries/: with the readers here, imports go one way (channels -> deliveries ->
linked_channels) instead of round in a circle.
"""

from __future__ import annotations

import re

from routines.models import LinkedChannel

TELEGRAM, WHATSAPP = LinkedChannel.Kind.TELEGRAM, LinkedChannel.Kind.WHATSAPP
NUMBER = re.compile(r"^\+?([1-9][0-9]{7,14})$")


def is_linked(account, kind: str, address: str | None = None) -> bool:
    """Whether `account` has a verified channel of `kind`; for WhatsApp, that very number."""
    channels = LinkedChannel.objects.filter(account=account, kind=kind, verified_at__isnull=False)
    if kind == WHATSAPP:
        number = normalize_number(address or "")
        if number is None:
            return False
        channels = channels.filter(address=number)
    return channels.exists()


def telegram_chat_id(account) -> str | None:
    channel = (LinkedChannel.objects.filter(account=account, kind=TELEGRAM, verified_at__isnull=False)
               .exclude(address="").order_by("-verified_at").first())
    return channel.address if channel else None


def normalize_number(text: str) -> str | None:
    """`+<digits>` (E.164) from `+5511999990000` or `5511999990000`; None when it is not one."""
    match = NUMBER.match((text or "").strip())
    return f"+{match.group(1)}" if match else None
