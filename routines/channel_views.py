"""Linked-channel endpoints: Telegram deep links and its bot webhook, WhatsApp numbers confirmed
with a code, the caller's channels. See routines/channels.py for the rules."""

from __future__ import annotations

import json

from django.http import Http404
from rest_framework import serializers

from accounts.endpoints import NONE, endpoint
from gateway.limits import ratelimit
from gateway.web.body import read_body, read_json_object
from gateway.web.output import respond, timestamp
from gateway.web.validation import validated
from routines.channels import (
    CODE_DIGITS,
    channel_delete,
    channel_list,
    channel_record,
    telegram_link_create,
    telegram_secret_matches,
    telegram_update_handle,
    whatsapp_code_send,
    whatsapp_verify,
)
from routines.linked_channels import normalize_number

NUMBER_HELP = "Give the number in international form, with the country code (for example +5511999990000)."


class NumberField(serializers.CharField):
    def __init__(self, **kwargs):
        super().__init__(max_length=32, **kwargs)

    def to_internal_value(self, data):
        number = normalize_number(super().to_internal_value(data))
        if number is None:
            raise serializers.ValidationError(NUMBER_HELP)
        return number


class NumberInput(serializers.Serializer):
    number = NumberField()


class VerifyInput(serializers.Serializer):
    number = NumberField()
    code = serializers.RegexField(
        rf"^[0-9]{{{CODE_DIGITS}}}$", max_length=CODE_DIGITS,
        error_messages={"invalid": f"The code is the {CODE_DIGITS} digits sent to the number."},
    )


@endpoint("GET")
def channels(request):
    return respond({"channels": [channel_record(c) for c in channel_list(account=request.principal.account)]})


@endpoint("DELETE")
def channel_detail(request, channel_id: int):
    channel_delete(account=request.principal.account, channel_id=channel_id)
    return respond({"deleted": True, "id": channel_id})


@endpoint("POST")
def telegram_link(request):
    link = telegram_link_create(account=request.principal.account)
    return respond({"link": link.link, "expires_at": timestamp(link.expires_at)}, status=201)


@endpoint("POST", auth=NONE, limit=ratelimit.DEFAULT)
def telegram_updates(request, secret: str):
    """Telegram posts every update of the bot here. The secret path segment is the credential;
    a wrong one is the plain 404 of an unknown route. Telegram is always answered 200 once the
    secret matched, so it does not resend an update we chose to ignore."""
    if not telegram_secret_matches(secret):
        raise Http404
    try:
        update = json.loads(read_body(request) or b"null")
    except (ValueError, RecursionError):
        update = None
    if isinstance(update, dict):
        telegram_update_handle(update)
    return respond({"ok": True})


@endpoint("POST")
def whatsapp_number(request):
    data = validated(NumberInput, read_json_object(request))
    channel = whatsapp_code_send(account=request.principal.account, number=data["number"])
    return respond({"channel": channel_record(channel), "code_expires_at": timestamp(channel.code_expires_at)},
                   status=201)


@endpoint("POST")
def whatsapp_confirm(request):
    data = validated(VerifyInput, read_json_object(request))
    channel = whatsapp_verify(account=request.principal.account, number=data["number"], code=data["code"])
    return respond({"channel": channel_record(channel)})
