"""Conversations of native chat: reading them (only the owner's, never the trashed ones),
moving them to the trash, deleting them for good, and saving the turns of a chat."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from gateway.web.errors import ApiError
from gateway.web.output import timestamp
from native.models import Conversation, Message

TITLE_CHARS = 80
PER_PAGE_DEFAULT = 20
PER_PAGE_MAX = 100


class ConversationNotFound(ApiError):
    def __init__(self) -> None:
        super().__init__(404, "Conversation not found.", code="not_found")


def conversation_get(*, account, conversation_id: Any) -> Conversation:
    """The account's conversation that is not in the trash; 404 for anything else."""
    try:
        return Conversation.objects.get(pk=int(conversation_id), account=account, trashed_at__isnull=True)
    except (Conversation.DoesNotExist, TypeError, ValueError, OverflowError):
        raise ConversationNotFound() from None


@dataclass(frozen=True)
class Page:
    items: list[Conversation]
    page: int
    per_page: int
    total: int

    @property
    def pages(self) -> int:
        return (self.total + self.per_page - 1) // self.per_page


def conversation_list(*, account, page: int, per_page: int) -> Page:
    """The account's conversations outside the trash, the most recently active first."""
    visible = (Conversation.objects.filter(account=account, trashed_at__isnull=True)
               .select_related("profile").order_by("-updated_at", "-id"))
    start = (page - 1) * per_page
    return Page(items=list(visible[start:start + per_page]), page=page, per_page=per_page, total=visible.count())


def conversation_trash(*, account, conversation_id: Any) -> None:
    conversation = conversation_get(account=account, conversation_id=conversation_id)
    Conversation.objects.filter(pk=conversation.pk).update(trashed_at=timezone.now())


def conversation_purge(*, account, conversation_id: Any) -> None:
    """Delete the account's conversation, in the trash or not, with its messages."""
    try:
        deleted, _ = Conversation.objects.filter(pk=int(conversation_id), account=account).delete()
    except (TypeError, ValueError, OverflowError):
        deleted = 0
    if not deleted:
        raise ConversationNotFound()


def conversation_history(conversation: Conversation | None) -> list[Message]:
    """The earlier messages a model is shown: user messages, and the replies that produced text."""
    if conversation is None:
        return []
    return list(conversation.messages.exclude(status=Message.Status.FAILED).order_by("id"))


@transaction.atomic
def user_message_save(*, account, conversation: Conversation | None, text: str, attachments: list[dict],
                      profile=None, request_id: str = "") -> Message:
    """The user's message, in a new conversation (titled after it) when none is given. A given
    conversation trashed or deleted since it was read is a 404 (an update, never a save of the
    stale instance, which would bring it back)."""
    if conversation is None:
        title = " ".join(text.split())[:TITLE_CHARS]
        conversation = Conversation.objects.create(account=account, title=title, profile=profile)
    else:
        fields: dict[str, Any] = {"updated_at": timezone.now()}  # moves it to the top of the list
        if profile is not None and conversation.profile_id != profile.pk:
            fields["profile"] = profile
        if not Conversation.objects.filter(pk=conversation.pk, account=account, trashed_at__isnull=True).update(
                **fields):
            raise ConversationNotFound()
    return Message.objects.create(conversation=conversation, role=Message.Role.USER, content=text,
                                  attachments=attachments, request_id=request_id)


@transaction.atomic
def assistant_message_save(*, conversation_id: int, text: str, model: str, status: str,
                           usage: dict[str, int] | None, citations: list[dict], request_id: str) -> Message | None:
    """The reply, or None when the conversation was deleted for good meanwhile (nothing saved).
    The update comes first: it locks the row, so a delete waits for the message and takes it too."""
    if not Conversation.objects.filter(pk=conversation_id).update(model=model, updated_at=timezone.now()):
        return None
    return Message.objects.create(conversation_id=conversation_id, role=Message.Role.ASSISTANT, content=text,
                                  model=model, status=status, usage=usage, citations=citations,
                                  request_id=request_id)


def conversation_data(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "profile": conversation.profile.name if conversation.profile_id and conversation.profile else None,
        "model": conversation.model or None,
        "created_at": timestamp(conversation.created_at),
        "updated_at": timestamp(conversation.updated_at),
    }


def message_data(message: Message) -> dict[str, Any]:
    return {
        "id": message.pk,
        "role": message.role,
        "content": message.content,
        "attachments": message.attachments,
        "citations": message.citations,
        "model": message.model or None,
        "status": message.status,
        "usage": message.usage,
        "request_id": message.request_id or None,
        "created_at": timestamp(message.created_at),
    }
