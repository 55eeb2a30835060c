"""Conversations of native chat (docs/design.md, "Conversations"): list, read, move to the trash, delete for good.
Only the caller's own; anything else is a 404. Errors are `{status: 'error', message}`."""

from __future__ import annotations

from rest_framework import serializers

from accounts.endpoints import endpoint
from gateway.limits import ratelimit
from gateway.web.output import respond
from gateway.web.validation import validated
from native.conversations import (
    PER_PAGE_DEFAULT,
    PER_PAGE_MAX,
    conversation_data,
    conversation_get,
    conversation_list,
    conversation_purge,
    conversation_trash,
    message_data,
)


class PageInput(serializers.Serializer):
    page = serializers.IntegerField(required=False, default=1, min_value=1, max_value=1_000_000)
    per_page = serializers.IntegerField(required=False, default=PER_PAGE_DEFAULT, min_value=1, max_value=PER_PAGE_MAX)


@endpoint("GET")
def conversations(request):
    query = validated(PageInput, request.GET.dict())
    page = conversation_list(account=request.principal.account, page=query["page"], per_page=query["per_page"])
    return respond({
        "status": "success",
        "data": [conversation_data(c) for c in page.items],
        "pagination": {"page": page.page, "per_page": page.per_page, "total": page.total, "pages": page.pages},
    })


@endpoint("GET")
def conversation_detail(request, conversation_id: int):
    found = conversation_get(account=request.principal.account, conversation_id=conversation_id)
    data = conversation_data(found)
    data["messages"] = [message_data(m) for m in found.messages.order_by("id")]
    return respond({"status": "success", "data": data})


@endpoint("DELETE")
def conversation_delete(request, conversation_id: int):
    conversation_trash(account=request.principal.account, conversation_id=conversation_id)
    return respond({"status": "success", "message": "Conversation moved to the trash."})


@endpoint("DELETE", limit=ratelimit.CONVERSATION_PURGE)
def conversation_permanent(request, conversation_id: int):
    conversation_purge(account=request.principal.account, conversation_id=conversation_id)
    return respond({"status": "success", "message": "Conversation deleted permanently."})
