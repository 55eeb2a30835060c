"""Inbound e-mail: a message to `<webhook_token>@<INBOUND_EMAIL_DOMAIN>` is an event of that
`email` routine, fed to the same ingest as a webhook call (spec 4.7 checks 2–8, without the
signature): the cap on the message's size, the duplicate window keyed on `Message-ID`, the
events-per-minute rule.

Recipients: the SMTP envelope (RCPT TO) when there is one — it is what the message was sent to,
Bcc included; otherwise `Delivered-To` / `X-Original-To` written by the MTA, otherwise To and Cc.
The routine sees the message's From, To, Subject and Date, then its text (text/plain preferred,
else the HTML reduced to text).
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import re
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import getaddresses
from html.parser import HTMLParser

from django.conf import settings

from routines.ingest import ingest
from routines.models import Routine

TOKEN = re.compile(r"^[0-9a-f]{32,64}$")
HEADERS_SHOWN = ("From", "To", "Cc", "Subject", "Date")


@dataclass
class Outcome:
    """What became of one message: one (address, status, body) per routine address it named."""

    answers: list[tuple[str, int, dict]] = field(default_factory=list)

    @property
    def unknown(self) -> bool:
        """No recipient was a routine's address."""
        return not self.answers or all(status == 404 for _, status, _ in self.answers)

    @property
    def too_large(self) -> bool:
        return any(status == 413 for _, status, _ in self.answers)

    @property
    def taken(self) -> bool:
        """Some routine accepted or deliberately ignored it (a 200 of ingest)."""
        return any(status == 200 for _, status, _ in self.answers)


def address_for(routine: Routine) -> str:
    return f"{routine.webhook_token}@{settings.INBOUND_EMAIL_DOMAIN}"


def token_of(address: str) -> str | None:
    """The routine token of an address of the inbound domain; None for any other address."""
    local, at, domain = (address or "").strip().strip("<>").rpartition("@")
    if not at or domain.lower().rstrip(".") != settings.INBOUND_EMAIL_DOMAIN:
        return None
    local = local.lower()
    return local if TOKEN.match(local) else ""


def is_inbound_domain(address: str) -> bool:
    return token_of(address) is not None


def routine_address_exists(address: str) -> bool:
    token = token_of(address)
    return bool(token) and Routine.objects.filter(webhook_token=token, trigger=Routine.Trigger.EMAIL).exists()


def receive_message(raw: bytes, *, envelope_recipients: list[str] | None = None) -> Outcome:
    """Feed one RFC 822 message to the routine(s) it is addressed to."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    recipients = envelope_recipients or _header_recipients(message)
    tokens: list[tuple[str, str]] = []
    for address in recipients:
        token = token_of(address)
        if token is not None and token not in {t for _, t in tokens}:
            tokens.append((address, token))
    limit = settings.WEBHOOK_MAX_BODY_BYTES
    # Over the cap the raw message itself goes to ingest, which answers 413 in the order of 4.7.
    body = raw if len(raw) > limit else _event_body(message, limit)
    event_id = _message_id(message, raw)
    outcome = Outcome()
    for address, token in tokens:
        if not token or not Routine.objects.filter(webhook_token=token, trigger=Routine.Trigger.EMAIL).exists():
            outcome.answers.append((address, 404, {"error": "not_found"}))
            continue
        status, answer = ingest(token, body, {"Content-Type": "text/plain; charset=utf-8"}, source="email",
                                event_id=event_id, verify_signature=False)
        outcome.answers.append((address, status, answer))
    return outcome


def _header_recipients(message: EmailMessage) -> list[str]:
    for names in (("Delivered-To", "X-Original-To"), ("To", "Cc")):
        values = [str(v) for name in names for v in (message.get_all(name) or [])]
        addresses = [address for _, address in getaddresses(values) if address]
        if any(is_inbound_domain(a) for a in addresses):
            return addresses
    return []


def _message_id(message: EmailMessage, raw: bytes) -> str:
    value = str(message.get("Message-ID") or "").strip()
    return value or "sha256:" + hashlib.sha256(raw).hexdigest()


def _event_body(message: EmailMessage, limit: int) -> bytes:
    lines = [f"{name}: {message[name]}" for name in HEADERS_SHOWN if message[name]]
    text = "\n".join(lines) + "\n\n" + message_text(message)
    data = text.encode("utf-8")
    if len(data) > limit:  # decoding can grow a message that fits; keep whole characters within the cap
        data = data[:limit].decode("utf-8", errors="ignore").encode("utf-8")
    return data


def message_text(message: EmailMessage) -> str:
    """The text of the message: its text/plain part, else its HTML reduced to text."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, UnicodeError, ValueError):
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", errors="replace")
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        content = html_to_text(content)
    return content.replace("\r\n", "\n").replace("\x00", "\ufffd").strip()


class _TextOf(HTMLParser):
    BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "blockquote"}
    SKIPPED = {"script", "style", "head", "title"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIPPED:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIPPED:
            self.skipping = max(self.skipping - 1, 0)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    parser = _TextOf()
    parser.feed(markup)
    parser.close()
    text = "".join(parser.parts)
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()
