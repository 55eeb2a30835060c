"""The agent's tool loop: ask the model with the tools on offer, run the calls it makes, give it
the results, until it answers (or a bound is reached). Used by agent chat (one turn) and agent
run (a task in steps).

Each round goes to the chain starting at the model that answered the round before (a fallback
that took over keeps the conversation). Provider failures are raised as `complete` raises them (a
refusal keeps its status; `ChainExhausted` when every model failed); a reply cut midway is a
504/502 with the text that had arrived. Every round's usage goes into the `Ledger`, metered by
the view after the response, whatever the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from gateway.calls import call_plan
from gateway.completion import Completion, complete, cut_error
from gateway.dispatch import ChainExhausted
from gateway.errors import ApiError
from gateway.metering import meter
from gateway.routing import Target, registry
from native.tools import Toolbox, ToolPlan, open_toolbox

SURFACE = "native_agent"
ANSWERED = "completed"
MAX_STEPS = "max_steps"
TIMEOUT = "timeout"


@dataclass
class Ledger:
    """The usage of every model round of one request, metered once it is over."""

    rounds: list[tuple[str, dict[str, int]]] = field(default_factory=list)

    def add(self, completion: Completion) -> None:
        self.rounds.append((completion.model, completion.usage))

    @property
    def usage(self) -> dict[str, int]:
        prompt = sum(u["prompt_tokens"] for _m, u in self.rounds)
        output = sum(u["completion_tokens"] for _m, u in self.rounds)
        return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}

    def meter(self, *, account_id: int, request_id: str) -> None:
        for model, usage in self.rounds:
            meter(account_id=account_id, model=model, surface=SURFACE, input_tokens=usage["prompt_tokens"],
                  output_tokens=usage["completion_tokens"], request_id=request_id)


@dataclass
class LoopState:
    """What the loop has done so far; kept by the caller, so a run stopped by its time bound
    still has its steps."""

    messages: list[dict[str, Any]]
    ledger: Ledger
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    model: str | None = None
    calls_made: int = 0


async def tool_loop(state: LoopState, *, chain: list[Target], toolbox: Toolbox, max_calls: int,
                    answer_last: bool) -> str:
    """At most `max_calls` model calls. With `answer_last` the last call is offered no tools, so
    the model answers; without it, a model still calling tools at the last call ends the loop
    unfinished. Returns the stop reason: `completed` or `max_steps`."""
    chain = list(chain)
    while state.calls_made < max_calls:
        last = state.calls_made == max_calls - 1
        offer = bool(toolbox.tools) and not (last and answer_last)
        body: dict[str, Any] = {"messages": state.messages}
        if toolbox.tools:
            body["tools"] = toolbox.specs()
            if not offer:
                body["tool_choice"] = "none"
        completion = await _ask(chain, body)
        state.calls_made += 1
        state.ledger.add(completion)
        state.model = completion.model
        if completion.cut:
            raise cut_error(completion)
        chain = chain[chain.index(completion.target):]
        state.text = completion.text
        if completion.text or not completion.tool_calls:
            state.steps.append({"type": "message", "content": completion.text})
        if not completion.tool_calls or not offer:
            return ANSWERED
        state.messages.append(completion.message)
        for call in completion.tool_calls:
            record = await toolbox.call(call["function"]["name"], call["function"]["arguments"])
            state.tool_calls.append(record)
            state.steps.append({"type": "tool_call", **record})
            content = record["result"] if "result" in record else f"Error: {record['error']}"
            state.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return MAX_STEPS


async def _ask(chain: list[Target], body: dict[str, Any]) -> Completion:
    """One model call; every model failing retryably is 503 with `retry_after` in the body too
    (spec 7.3), whatever status the providers sent."""
    try:
        return await complete(chain, body, refusals_fall_through=False)
    except ChainExhausted as failure:
        if failure.retry_after is not None:
            failure.extra["retry_after"] = failure.retry_after
        raise


@dataclass(frozen=True)
class AgentRequest:
    """An agent request after the checks (`request.prepared`)."""

    account_id: int
    messages: list[dict[str, Any]]  # prior turns and the new message (chat), or the task (run)
    chain: list[Target]
    tools: ToolPlan
    max_steps: int = 0  # run only


def agent_chain(*, account, model_id: Any, quota_used=None) -> list[Target]:
    """The chain of the named model (none named: the default model). Unlike /v1, a name no
    model has is not answered by the default: it is 400 (spec 7.2), and so is a server that
    does not exist. Then the group's limits and the token quota (403)."""
    reg = registry()
    if model_id is None:
        if reg.default is None:
            raise ApiError(400, "No model was named and no default model is configured.", code="model_not_found")
        model_id = reg.default.public_id
    elif not isinstance(model_id, str) or not model_id:
        raise ApiError(400, "'model' must be the name of a model.", code="invalid_request_error")
    elif model_id not in reg.by_public_id and model_id not in reg.by_name:
        server, sep, _name = model_id.partition("/")
        if sep and server not in reg.server_names:
            raise ApiError(400, f"The model '{model_id}' does not exist: no model server is named '{server}'.",
                           code="model_not_found")
        raise ApiError(400, f"The model '{model_id}' does not exist.", code="model_not_found")
    return call_plan(account=account, model_id=model_id, quota_used=quota_used)


async def agent_chat_turn(request: AgentRequest, ledger: Ledger) -> dict[str, Any]:
    """One turn: the model may call tools up to AGENT_MAX_TOOL_ROUNDS times, then answers."""
    toolbox = await open_toolbox(request.tools)
    state = LoopState(messages=list(request.messages), ledger=ledger)
    await tool_loop(state, chain=request.chain, toolbox=toolbox, max_calls=settings.AGENT_MAX_TOOL_ROUNDS + 1,
                    answer_last=True)
    return {"reply": state.text, "tool_calls": state.tool_calls, "model": state.model, "usage": ledger.usage,
            "skipped_servers": toolbox.skipped}
