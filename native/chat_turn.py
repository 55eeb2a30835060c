"""One turn of native chat before the model is called: the request checked, the profile, the
conversation, the collections and the chain resolved (`chat_turn_prepare`, the endpoint's
`prepare` step), then the model request built from the profile, the retrieved chunks, the
conversation's history trimmed to the model's context, and the new message (`chat_request`).

Refusals here are plain HTTP errors (`{detail}`, 422 `{message, errors}`), except a used-up
token quota: native chat reports it inside its 200 stream (spec 8.4), so it is kept in
`Turn.refusal` for the stream to send.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from rest_framework import serializers

from gateway.calls.plan import affinity_of
from gateway.calls.tokens import REPLY_PRIMER, count_chat_request
from gateway.limits.quotas import quota_check
from gateway.models import Model
from gateway.registry.routing import plan_chain
from gateway.registry.snapshot import Target, registry
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError, ValidationFailed
from gateway.web.validation import StrictCharField, validated
from native.attachments import Attachment, parse_attachments, stored_parts
from native.conversations import conversation_get, conversation_history
from native.models import Collection, Conversation, Message, Profile


class ChatInput(serializers.Serializer):
    message = StrictCharField(trim_whitespace=False)
    conversation_id = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    model = StrictCharField(required=False, allow_null=True, max_length=300)
    profile = StrictCharField(required=False, allow_null=True, max_length=64)
    attachments = serializers.ListField(child=serializers.JSONField(), required=False, allow_null=True)
    collection_id = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    stream = serializers.BooleanField(required=False, default=True)

    def validate_message(self, value: str) -> str:
        if not value.strip():  # kept as sent otherwise
            raise serializers.ValidationError(self.fields["message"].error_messages["blank"])
        limit = settings.CHAT_MESSAGE_MAX_CHARS
        if len(value) > limit:
            raise serializers.ValidationError(f"Ensure this field has no more than {limit} characters.")
        return value


@dataclass
class Turn:
    """What the view needs after the checks (`request.prepared`)."""

    account: Any
    message: str
    attachments: list[Attachment]
    conversation: Conversation | None
    profile: Profile | None
    collections: list[Collection]
    chain: list[Target]
    context_window: int
    stream: bool
    model_id: str = ""  # the model asked for (else the profile's or the default's): the response cache's key
    history: list[Message] = field(default_factory=list)
    refusal: ApiError | None = None  # a used-up token quota, sent inside the stream


def chat_turn_prepare(request) -> Turn:
    account = request.principal.account
    data = validated(ChatInput, read_json_object(request))
    items = data.get("attachments") or []
    allowed = account.group.attachments_per_message
    if len(items) > allowed:
        raise ApiError(403, f"Your account group allows at most {allowed} attachments per message; "
                            f"this one has {len(items)}.", code="permission_denied")
    attachments, problems = parse_attachments(items)
    if problems:
        raise ValidationFailed(problems)

    conversation = None
    if data.get("conversation_id") is not None:
        conversation = conversation_get(account=account, conversation_id=data["conversation_id"])
    profile = _profile(account, data.get("profile"), conversation)
    collections = list(profile.collections.all()) if profile else []
    if data.get("collection_id") is not None:
        own = Collection.objects.filter(pk=data["collection_id"], account=account).first()
        if own is None:
            raise ApiError(404, "Collection not found.", code="not_found")
        collections = [own, *(c for c in collections if c.pk != own.pk)]

    model_id = _model_id(data.get("model"), profile)
    chain = plan_chain(model_id, group=account.group,
                       affinity=affinity_of(request, conversation_id=conversation.pk if conversation else None))
    refusal = None
    try:
        quota_check(account=account, used=request.quota_used)
    except ApiError as exc:
        refusal = exc
    windows = Model.objects.filter(pk__in=[t.id for t in chain]).values_list("context_window", flat=True)
    return Turn(
        account=account, message=data["message"], attachments=attachments, conversation=conversation,
        profile=profile, collections=collections, chain=chain, stream=data["stream"], model_id=model_id,
        context_window=min(windows, default=Model._meta.get_field("context_window").default),
        history=conversation_history(conversation) if refusal is None else [], refusal=refusal,
    )


def _profile(account, name: str | None, conversation: Conversation | None) -> Profile | None:
    """The profile named in the request, else the one the conversation was held with. It must be
    enabled and granted to the caller's group."""
    if name:
        profile = Profile.objects.select_related("model__server").filter(name=name).first()
        if profile is None:
            raise ValidationFailed({"profile": [f"There is no profile named '{name}'."]})
    elif conversation is not None and conversation.profile_id:
        profile = Profile.objects.select_related("model__server").get(pk=conversation.profile_id)
    else:
        return None
    if not profile.enabled or not profile.groups.filter(pk=account.group_id).exists():
        raise ApiError(403, f"The profile '{profile.name}' is not available to your account group.",
                       code="permission_denied")
    return profile


def _model_id(requested: str | None, profile: Profile | None) -> str:
    """The requested model, else the profile's, else the default model."""
    if requested:
        return requested
    if profile is not None and profile.model is not None:
        return profile.model.public_id
    default = registry().default
    if default is None:
        raise ValidationFailed({"model": ["Name a model or a profile: no default model is configured."]})
    return default.public_id


# ---- the model request ---------------------------------------------------------------------------

def chat_request(turn: Turn, hits: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat-completions body sent to the chain: the system context (the profile's prompt, the
    retrieved chunks), the history that fits the model's context, then the new message."""
    system = system_context(turn.profile, hits)
    lead = [{"role": "system", "content": system}] if system else []
    current = {"role": "user", "content": user_content(turn.message, [a.content_part() for a in turn.attachments])}
    history = [history_message(m) for m in turn.history]
    reserve = min(settings.CHAT_REPLY_RESERVE_TOKENS, turn.context_window // 4)
    kept = fit_history(lead + [current], history, budget=turn.context_window - reserve)
    body: dict[str, Any] = {"messages": [*lead, *kept, current]}
    if turn.profile is not None and turn.profile.temperature is not None:
        body["temperature"] = turn.profile.temperature
    return body


def user_content(text: str, parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    return [{"type": "text", "text": text}, *parts] if parts else text


def history_message(message: Message) -> dict[str, Any]:
    if message.role == Message.Role.USER:
        return {"role": "user", "content": user_content(message.content, stored_parts(message.attachments))}
    return {"role": "assistant", "content": message.content}


def fit_history(fixed: list[dict[str, Any]], history: list[dict[str, Any]], *, budget: int) -> list[dict[str, Any]]:
    """The newest messages of `history` that fit in `budget` tokens with the `fixed` ones; the
    oldest go first. The kept part starts with a user message."""
    used = count_chat_request({"messages": fixed})
    kept: list[dict[str, Any]] = []
    for message in reversed(history):
        cost = count_chat_request({"messages": [message]}) - REPLY_PRIMER
        if used + cost > budget:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    while kept and kept[0]["role"] != "user":
        kept.pop(0)
    return kept


def system_context(profile: Profile | None, hits: list[dict[str, Any]]) -> str:
    parts = [profile.system_prompt.strip()] if profile is not None and profile.system_prompt.strip() else []
    if hits:
        excerpts = "\n\n".join(f"[{n}] {hit['document_name']}:\n{hit['text']}" for n, hit in enumerate(hits, 1))
        parts.append(
            "Excerpts from the user's documents follow. Use them when they answer the question and cite "
            "each one you use by its number in square brackets, like [1].\n\n" + excerpts
        )
    return "\n\n".join(parts)


def citations_of(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chunks put before the model, as the reply cites them: `index` is the [n] of the context."""
    return [
        {"index": n, "collection_id": hit.get("collection_id"), "document_id": hit["document_id"],
         "document_name": hit["document_name"], "chunk_id": hit["chunk_id"], "position": hit["position"],
         "score": round(float(hit["score"]), 6), "text": hit["text"]}
        for n, hit in enumerate(hits, 1)
    ]
