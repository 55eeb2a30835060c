"""Delivery targets (spec 2.4): `inapp`, `email:<address>`, `webhook:https://<url>`, and the
targets of a linked channel, `telegram` and `whatsapp:<number>`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email

from routines.linked_channels import is_linked

INAPP, EMAIL, WEBHOOK, TELEGRAM, WHATSAPP = "inapp", "email", "webhook", "telegram", "whatsapp"
KINDS = (INAPP, EMAIL, WEBHOOK, TELEGRAM, WHATSAPP)
MIN_TARGETS, MAX_TARGETS = 1, 5
MAX_TARGET_CHARS = 600
WHATSAPP_NUMBER = re.compile(r"^\+?[1-9][0-9]{7,14}$")
FORMS = "inapp, email:<address>, webhook:https://<url>, telegram or whatsapp:<number>"
_https_url = URLValidator(schemes=["https"])


@dataclass(frozen=True)
class Target:
    kind: str
    value: str  # the address, URL or number; "" for inapp and telegram


def parse_target(text: str) -> Target:
    """The kind and value of a target; ValueError with the reason when it is not one."""
    if not isinstance(text, str):
        raise ValueError("must be a string")
    if len(text) > MAX_TARGET_CHARS:
        raise ValueError(f"is longer than {MAX_TARGET_CHARS} characters")
    if text in (INAPP, TELEGRAM):
        return Target(text, "")
    kind, sep, value = text.partition(":")
    if not sep or kind not in (EMAIL, WEBHOOK, WHATSAPP):
        raise ValueError(f"'{text}' is not a delivery target; use {FORMS}")
    if kind == EMAIL:
        try:
            validate_email(value)
        except ValidationError:
            raise ValueError(f"'{value}' is not a valid e-mail address") from None
    elif kind == WEBHOOK:
        if not value.lower().startswith("https://"):
            raise ValueError("a webhook target must be an https:// URL")
        try:
            _https_url(value)
        except ValidationError:
            raise ValueError(f"'{value}' is not a valid https URL") from None
    elif not WHATSAPP_NUMBER.match(value):
        raise ValueError(f"'{value}' is not a phone number in international form (+5511999990000)")
    return Target(kind, value)


def target_errors(account, targets: list) -> list[str]:
    """Messages for what is wrong with a list of targets; empty when it is valid. A `telegram`
    or `whatsapp:` target is refused until the account has linked that channel."""
    if not isinstance(targets, list):
        return ["Must be a list of delivery targets."]
    if not MIN_TARGETS <= len(targets) <= MAX_TARGETS:
        return [f"Give between {MIN_TARGETS} and {MAX_TARGETS} delivery targets; got {len(targets)}."]
    errors: list[str] = []
    seen: set[str] = set()
    for index, text in enumerate(targets):
        try:
            target = parse_target(text)
        except ValueError as exc:
            errors.append(f"Target {index + 1} {exc}." if str(exc).startswith(("must", "is ")) else
                          f"Target {index + 1}: {exc}.")
            continue
        if text in seen:
            errors.append(f"Target {index + 1} repeats an earlier target.")
            continue
        seen.add(text)
        if target.kind in (TELEGRAM, WHATSAPP) and not _linked(account, target):
            channel = "a Telegram chat" if target.kind == TELEGRAM else f"the WhatsApp number {target.value}"
            errors.append(f"Target {index + 1}: link and verify {channel} before delivering to it.")
    return errors


def _linked(account, target: Target) -> bool:
    return is_linked(account, target.kind, target.value or None)
