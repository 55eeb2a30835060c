"""Agent run: a task run to completion in bounded steps and time. A step is one model call and
the tool calls it asks for; the run ends when the model answers without calling a tool
(`completed`), at `max_steps` (`max_steps`, unfinished) or at AGENT_RUN_TIMEOUT_SECONDS
(`timeout`, unfinished, with the steps done so far; listing the tools counts too), or when a
token ceiling is reached before a step after the first (`quota`, unfinished)."""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings

from native.agent import ANSWERED, QUOTA, TIMEOUT, AgentRequest, Ledger, LoopState, QuotaReached, tool_loop
from native.tools.toolbox import open_toolbox


async def agent_run_task(request: AgentRequest, ledger: Ledger) -> dict[str, Any]:
    state = LoopState(messages=list(request.messages), ledger=ledger)
    toolbox = None
    try:
        async with asyncio.timeout(settings.AGENT_RUN_TIMEOUT_SECONDS):
            toolbox = await open_toolbox(request.tools)
            reason = await tool_loop(state, request, toolbox=toolbox, max_calls=request.max_steps, answer_last=False)
    except TimeoutError:
        reason = TIMEOUT
    except QuotaReached:
        reason = QUOTA
    return {
        "result": state.text,
        "steps": state.steps,
        "finished": reason == ANSWERED,
        "stop_reason": reason,
        "model": state.model or request.chain[0].public_id,
        "usage": ledger.usage,
        "skipped_servers": toolbox.skipped if toolbox is not None else [],
    }
