"""The agent's tool loop: ask the model with the tools on offer, run the calls it makes, give it
the results, until it answers (or a bound is reached). Used by agent chat (one turn) and agent
run (a task in steps).

Each round goes to the chain starting at the model that answered the round before (a fallback
that took over keeps the conversation). Provider failures are raised as `complete` raises them (a
refusal keeps its status; `ChainExhausted` when every model failed); a reply cut midway is a
504/502 with the text that had arrived. Every round's usage goes into the `Ledger`, which
meters it as soon as the round is over (so a request the client gives up on, or that fails in a
later round, is still metered, once; a round cut off by the client going away is metered with
what had arrived). Before each round after the first the token quota is
checked again with what the request used so far (`QuotaReached`, a 403).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from gateway.calls.chain import ChainExhausted
from gateway.calls.completion import (
    Completion,
    complete,
    completion_cost_units,
    completion_cut_error,
    meter_completion,
)
from gateway.calls.screened import screening_for
from gateway.guard import Screening
from gateway.limits.quotas import Used, quota_check
from gateway.registry.snapshot import Target
from gateway.web.errors import ApiError
from native.tools.toolbox import Toolbox, ToolPlan, open_toolbox

SURFACE = "native_agent"
ANSWERED = "completed"
MAX_STEPS = "max_steps"
TIMEOUT = "timeout"
QUOTA = "quota"


class QuotaReached(ApiError):
    """A token ceiling reached between two rounds of one request (403)."""


@dataclass
class Ledger:
    """The usage of every model round of one request, each metered as soon as it is added."""

    account_id: int
    request_id: str
    rounds: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    spent_units: int = 0  # what the rounds cost, in COST_UNITS (gateway/registry/prices.py)

    async def add(self, completion: Completion) -> None:
        """Record and meter one round; shielded, so a cancelled request still meters it."""
        self.rounds.append((completion.model, completion.usage))
        self.spent_units += completion_cost_units(completion)
        await meter_completion(completion, account_id=self.account_id, surface=SURFACE, request_id=self.request_id)

    @property
    def usage(self) -> dict[str, int]:
        prompt = sum(u["prompt_tokens"] for _m, u in self.rounds)
        output = sum(u["completion_tokens"] for _m, u in self.rounds)
        return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}


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


async def tool_loop(state: LoopState, request: AgentRequest, *, toolbox: Toolbox, max_calls: int,
                    answer_last: bool) -> str:
    """At most `max_calls` model calls. With `answer_last` the last call is offered no tools, so
    the model answers; without it, a model still calling tools at the last call ends the loop
    unfinished. Returns the stop reason: `completed` or `max_steps`; raises `QuotaReached` when
    a token ceiling is reached before a round after the first. At most
    AGENT_MAX_TOOL_CALLS_PER_ROUND calls of one round are run; the others are answered with an
    error."""
    chain = list(request.chain)
    most = settings.AGENT_MAX_TOOL_CALLS_PER_ROUND
    # One screening for every round: a value keeps its placeholder, and the tools' results that each
    # round adds to the messages pass the input checks before the next model call reads them.
    screening = screening_for(request.account.group, request.request_id)
    while state.calls_made < max_calls:
        if state.calls_made:
            request.check_quota(spent=state.ledger.usage["total_tokens"], spent_units=state.ledger.spent_units)
        last = state.calls_made == max_calls - 1
        offer = bool(toolbox.tools) and not (last and answer_last)
        body: dict[str, Any] = {"messages": state.messages}
        if toolbox.tools:
            body["tools"] = toolbox.specs()
            if not offer:
                body["tool_choice"] = "none"
        try:
            completion = await _ask(chain, body, screening)
        except asyncio.CancelledError as cancelled:  # the client went away mid-reply
            if getattr(cancelled, "partial", None) is not None:
                await state.ledger.add(cancelled.partial)
            raise
        state.calls_made += 1
        await state.ledger.add(completion)
        state.model = completion.model
        if completion.cut:
            raise completion_cut_error(completion)
        chain = chain[chain.index(completion.target):]
        state.text = completion.text
        if completion.text or not completion.tool_calls:
            state.steps.append({"type": "message", "content": completion.text})
        if not completion.tool_calls or not offer:
            return ANSWERED
        state.messages.append(completion.message)
        for index, call in enumerate(completion.tool_calls):
            refused = None if index < most else f"Not run: at most {most} tool calls are run per round."
            record = await toolbox.call(call["function"]["name"], call["function"]["arguments"], refused=refused)
            state.tool_calls.append(record)
            state.steps.append({"type": "tool_call", **record})
            content = record["result"] if "result" in record else f"Error: {record['error']}"
            state.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return MAX_STEPS


async def _ask(chain: list[Target], body: dict[str, Any], screening: Screening | None) -> Completion:
    """One model call; every model failing retryably is 503 with `retry_after` in the body too
    (spec 7.3), whatever status the providers sent."""
    try:
        return await complete(chain, body, refusals_fall_through=False, screening=screening)
    except ChainExhausted as failure:
        if failure.retry_after is not None:
            failure.extra["retry_after"] = failure.retry_after
        raise


@dataclass(frozen=True)
class AgentRequest:
    """An agent request after the checks (`request.prepared`)."""

    account_id: int
    messages: list[dict[str, Any]]  # prior turns and the new message (chat), or the task (run)
    request_id: str
    chain: list[Target]
    tools: ToolPlan
    account: Any  # for its group's token ceilings and its budgets
    quota_used: Used | None  # the quota and budget windows read with the request's ceilings
    max_steps: int = 0  # run only

    def check_quota(self, *, spent: int, spent_units: int = 0) -> None:
        """`QuotaReached` when a ceiling or a budget is reached counting the `spent` tokens and
        `spent_units` of money of this request (metered already, but not in the windows read before it)."""
        used = None if self.quota_used is None else self.quota_used.plus(tokens=spent, cost_units=spent_units)
        try:
            quota_check(account=self.account, used=used)
        except ApiError as refused:
            raise QuotaReached(refused.status, refused.message, code=refused.code) from None


async def agent_chat_turn(request: AgentRequest, ledger: Ledger) -> dict[str, Any]:
    """One turn: the model may call tools up to AGENT_MAX_TOOL_ROUNDS times, then answers; all
    of it within AGENT_CHAT_TIMEOUT_SECONDS (else 504)."""
    state = LoopState(messages=list(request.messages), ledger=ledger)
    seconds = settings.AGENT_CHAT_TIMEOUT_SECONDS
    try:
        async with asyncio.timeout(seconds):
            toolbox = await open_toolbox(request.tools)
            await tool_loop(state, request, toolbox=toolbox, max_calls=settings.AGENT_MAX_TOOL_ROUNDS + 1,
                            answer_last=True)
    except TimeoutError:
        raise ApiError(504, f"The agent did not answer within {seconds:g} seconds.", code="timeout") from None
    return {"reply": state.text, "tool_calls": state.tool_calls, "model": state.model, "usage": ledger.usage,
            "skipped_servers": toolbox.skipped}
