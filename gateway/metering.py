"""Usage of a call, counted after the reply (never before it): the quota counters of the
account at once, then a usage record through the batched writer (gateway/usage_writer.py)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpResponse
from django.utils import timezone

from gateway.models import UsageRecord
from gateway.quotas import quota_add
from gateway.replies import ReplyAccumulator
from gateway.tokens import count_chat_request, count_text
from gateway.usage_writer import usage_writer


def usage_of(reply: ReplyAccumulator, body: dict) -> dict[str, int]:
    """The server's usage when it gave one; otherwise counted from the request and from what
    was delivered (a reply cut midway counts what arrived)."""
    usage = reply.usage or {}
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    if prompt is None:
        prompt = count_chat_request(body)
    if completion is None:
        completion = count_text(reply.delivered_output_text())
    return {"prompt_tokens": int(prompt), "completion_tokens": int(completion),
            "total_tokens": int(prompt) + int(completion)}


def meter(*, account_id: int, model: str, surface: str, input_tokens: int, output_tokens: int,
          request_id: str = "") -> None:
    total = input_tokens + output_tokens
    if total <= 0:
        return
    quota_add(account_id=account_id, tokens=total)
    usage_writer.submit(UsageRecord(
        account_id=account_id, model=model, surface=surface, input_tokens=input_tokens,
        output_tokens=output_tokens, request_id=request_id[:64], created_at=timezone.now(),
    ))


class AfterSendResponse(HttpResponse):
    """Runs `after_send` when Django closes the response: after its body has gone out."""

    def __init__(self, content, *, after_send: Callable[[], None], **kwargs) -> None:
        super().__init__(content, **kwargs)
        self._after_send = after_send

    def close(self) -> None:
        try:
            self._after_send()
        finally:
            super().close()
