"""POST /api/v1/agent/chat and POST /api/v1/agent/run (errors `{detail}`, spec 7.1–7.3).

The checks run in the endpoint's `prepare` step (worker hop): the body (422), the model (400 for
one that does not exist, 403 for the group's limits and the token quota) and the tools (400/403).
The view then runs the tool loop and answers; the usage of every model round is metered as soon
as the round is over, also when a later round failed or the client went away."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from accounts.endpoints import endpoint
from gateway.calls.plan import MAX_MESSAGE_CHARS, MAX_MESSAGES
from gateway.limits import ratelimit
from gateway.telemetry import call_facts
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError, render_error
from gateway.web.output import respond
from gateway.web.validation import StrictCharField, validated
from native.agent import AgentRequest, Ledger, agent_chat_turn
from native.agent_chain import agent_chain
from native.agent_run import agent_run_task
from native.tools.toolbox import tool_plan

AGENT_MESSAGE_MAX_CHARS = 32000  # spec 8.6: fixed on agent chat, not a setting


class Turn(serializers.Serializer):
    role = serializers.ChoiceField(choices=["system", "user", "assistant"])
    content = StrictCharField(trim_whitespace=False, allow_blank=True, max_length=MAX_MESSAGE_CHARS)


class ChatInput(serializers.Serializer):
    message = StrictCharField(trim_whitespace=False, max_length=AGENT_MESSAGE_MAX_CHARS)
    model = StrictCharField(required=False, allow_null=True, max_length=300)
    # A ListField, not Turn(many=True): that passes allow_null on to each turn, and a null turn got through.
    messages = serializers.ListField(child=Turn(), required=False, allow_null=True, max_length=MAX_MESSAGES - 1)
    tools = serializers.ListField(child=StrictCharField(max_length=200), required=False, allow_null=True)


class RunInput(serializers.Serializer):
    task = StrictCharField(trim_whitespace=False, max_length=AGENT_MESSAGE_MAX_CHARS)
    model = StrictCharField(required=False, allow_null=True, max_length=300)
    tools = serializers.ListField(child=StrictCharField(max_length=200), required=False, allow_null=True)
    max_steps = serializers.IntegerField(required=False, allow_null=True, min_value=1)

    def validate_max_steps(self, value: int | None) -> int | None:
        ceiling = settings.AGENT_RUN_MAX_STEPS
        if value is not None and value > ceiling:
            raise serializers.ValidationError(f"Ensure this value is less than or equal to {ceiling}.")
        return value


def _prepare(request, data: dict[str, Any], messages: list[dict[str, Any]], max_steps: int = 0) -> AgentRequest:
    account = request.principal.account
    chain = agent_chain(account=account, model_id=data.get("model"), quota_used=request.quota_used)
    tools = tool_plan(account=account, wanted=data.get("tools"), request_id=request.request_id)
    return AgentRequest(account_id=account.pk, messages=messages, request_id=request.request_id, chain=chain,
                        tools=tools, account=account, quota_used=request.quota_used, max_steps=max_steps)


def prepare_chat(request) -> AgentRequest:
    data = validated(ChatInput, read_json_object(request))
    prior = [{"role": m["role"], "content": m["content"]} for m in data.get("messages") or ()]
    return _prepare(request, data, [*prior, {"role": "user", "content": data["message"]}])


def prepare_run(request) -> AgentRequest:
    data = validated(RunInput, read_json_object(request))
    return _prepare(request, data, [{"role": "user", "content": data["task"]}],
                    max_steps=data.get("max_steps") or settings.AGENT_RUN_MAX_STEPS)


@endpoint("POST", limit=ratelimit.AGENT_CHAT, prepare=prepare_chat, idempotent=True)
async def agent_chat(request):
    return await _answer(request, agent_chat_turn)


@endpoint("POST", limit=ratelimit.AGENT_RUN, prepare=prepare_run, idempotent=True)
async def agent_run(request):
    return await _answer(request, agent_run_task)


async def _answer(request, service):
    prepared = request.prepared
    ledger = Ledger(account_id=prepared.account_id, request_id=prepared.request_id)  # meters each round
    try:
        result = await service(prepared, ledger)
    except ApiError as exc:
        return render_error(request, exc)
    call_facts.reply_text(result.get("reply", result.get("result", "")))  # kept only if the group keeps text
    return respond({**result, "request_id": request.request_id})
