"""`whatsapp:<number>`: the run's text to a number the owner confirmed, through the WhatsApp Cloud
API (`POST {WHATSAPP_API_BASE}/{WHATSAPP_PHONE_NUMBER_ID}/messages`, `Authorization: Bearer
{WHATSAPP_TOKEN}`).

Texts over WhatsApp's 4096 characters go as several messages. The token is never shown in an
error or a log line. Meta delivers a free-form text only within 24 hours of the user's last
message to the business; outside it the provider refuses (a non-retryable failure here).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from routines.deliveries.base import DeliveryFailed, post_to_provider
from routines.deliveries.telegram import split_text
from routines.linked_channels import is_linked, normalize_number

MAX_CHARS = 4096


def send(run, target: str, text: str) -> None:
    given = target.partition(":")[2]
    number = normalize_number(given)
    if number is None or not is_linked(run.routine.account, "whatsapp", number):
        raise DeliveryFailed(f"The WhatsApp number {given} is not linked and verified on this account.")
    for part in split_text(text or "(empty output)", MAX_CHARS):
        send_text(number, part)


def configured() -> bool:
    return bool(settings.WHATSAPP_TOKEN and settings.WHATSAPP_PHONE_NUMBER_ID)


def send_text(number: str, text: str) -> None:
    post_message({"to": number, "type": "text", "text": {"preview_url": False, "body": text}})


def send_code(number: str, code: str) -> None:
    """The confirmation code: a plain text, or the approved authentication template named by
    WHATSAPP_CODE_TEMPLATE (its body and its copy-code button both take the code)."""
    template = settings.WHATSAPP_CODE_TEMPLATE
    if not template:
        send_text(number, f"Your confirmation code is {code}. It expires in "
                          f"{settings.CHANNEL_CODE_TTL_SECONDS // 60} minutes.")
        return
    parameter = [{"type": "text", "text": code}]
    post_message({
        "to": number,
        "type": "template",
        "template": {
            "name": template,
            "language": {"code": settings.WHATSAPP_CODE_TEMPLATE_LANGUAGE},
            "components": [
                {"type": "body", "parameters": parameter},
                {"type": "button", "sub_type": "url", "index": "0", "parameters": parameter},
            ],
        },
    })


def post_message(message: dict[str, Any]) -> None:
    """One Cloud API `messages` call; DeliveryFailed (retryable on 429, 5xx and network errors)."""
    if not configured():
        raise DeliveryFailed("WhatsApp is not configured on this gateway "
                             "(WHATSAPP_TOKEN and WHATSAPP_PHONE_NUMBER_ID are needed).")
    url = f"{settings.WHATSAPP_API_BASE.rstrip('/')}/{settings.WHATSAPP_PHONE_NUMBER_ID}/messages"
    body = {"messaging_product": "whatsapp", "recipient_type": "individual", **message}
    post_to_provider("WhatsApp", url, body, headers={"Authorization": f"Bearer {settings.WHATSAPP_TOKEN}"},
                     describe=lambda answer: (answer.get("error") or {}).get("message"))
