"""The gateway's own tools: list the caller's models and chat with one, search one of the
caller's collections, list and start the caller's routines. The MCP server endpoint offers them
all; the agent offers `AGENT_TOOLS` (a model answering a model through `chat` would meter one
request twice, and the lists are the MCP client's to browse).

`chat`, `search_collection` and `start_routine` refuse with the same `ApiError` as the REST
endpoints (native/tools/tool.py turns it into an error result): another account's collection or
routine is "not found", a paused routine is refused as run-now refuses it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.calls.completion import complete, meter_completion
from gateway.calls.cuts import cut_error
from gateway.calls.plan import check_chat_size
from gateway.calls.screened import screening_for
from gateway.guard import Screening
from gateway.registry.routing import usable_targets
from gateway.registry.snapshot import registry
from gateway.state.workers import in_worker
from gateway.usage.call_log import cut_midway, own_call
from gateway.web.errors import ApiError
from native.agent_chain import agent_chain
from native.collections import collection_get
from native.search import search_collection as search
from native.tools.tool import Caller, Tool, ToolResult
from routines.models import Routine
from routines.records import routine_summary
from routines.run_start import start_manual_run

SURFACE = "mcp"
MAX_SEARCH_RESULTS = 20
SEARCH_COLLECTION = "search_collection"
START_ROUTINE = "start_routine"
AGENT_TOOLS = (SEARCH_COLLECTION, START_ROUTINE)


# -- list_models -------------------------------------------------------------------------------


def _models(account) -> list[dict[str, Any]]:
    default = registry().default
    return [
        {"id": t.public_id, "server": t.server.name, "capabilities": sorted(t.capabilities),
         "default": default is not None and t.id == default.id}
        for t in usable_targets(account.group)
    ]


async def list_models(caller: Caller, arguments: dict[str, Any]) -> ToolResult:
    return ToolResult.data({"models": await in_worker(_models)(caller.account)})


# -- chat --------------------------------------------------------------------------------------


def _chat_plan(account, arguments: dict[str, Any], request_id: str) -> tuple[list, dict[str, Any], Screening | None]:
    """The chain, the chat body and the guardrails of the caller's group; ApiError for what the caller
    may not do."""
    if ("prompt" in arguments) == ("messages" in arguments):
        raise ApiError(400, "Give either 'prompt' or 'messages', not both and not neither.")
    messages = list(arguments.get("messages") or [{"role": "user", "content": arguments["prompt"]}])
    if arguments.get("system"):
        messages.insert(0, {"role": "system", "content": arguments["system"]})
    body: dict[str, Any] = {"messages": messages}
    for name in ("temperature", "max_tokens"):
        if name in arguments:
            body[name] = arguments[name]
    check_chat_size(body)
    # A name no model has is refused as on agent chat, not answered by the default model.
    chain = agent_chain(account=account, model_id=arguments.get("model"))
    body["model"] = arguments.get("model") or chain[0].public_id
    return chain, body, screening_for(account.group, request_id)


async def chat(caller: Caller, arguments: dict[str, Any]) -> ToolResult:
    """Each chat is a call of its own in the calls log (surface `mcp`, tagged tool=chat), refused or answered."""
    metered = {"account_id": caller.account.pk, "surface": SURFACE, "request_id": caller.request_id}
    with own_call(surface=SURFACE, account=caller.account, request_id=caller.request_id,
                  tags={"tool": "chat"}) as call:
        chain, body, screening = await in_worker(_chat_plan)(caller.account, arguments, caller.request_id)
        try:
            completion = await complete(chain, body, refusals_fall_through=False, screening=screening)
        except asyncio.CancelledError as cancelled:  # the client went away mid-reply
            if getattr(cancelled, "partial", None) is not None:
                await meter_completion(cancelled.partial, **metered)
            raise
        await meter_completion(completion, **metered)
        if completion.cut is not None:
            cut_midway(call, cut_error(completion.cut).code)
    usage = completion.usage
    if completion.cut is not None:
        stopped = cut_error(completion.cut).message
        return ToolResult.error(f"{stopped} Partial reply: {completion.text}" if completion.text else stopped)
    return ToolResult(completion.text, {"model": completion.model, "text": completion.text,
                                         "finish_reason": completion.finish_reason, "usage": usage})


# -- search_collection -------------------------------------------------------------------------


async def search_collection(caller: Caller, arguments: dict[str, Any]) -> ToolResult:
    """Another account's collection is not found, as on /api/v1/collections."""
    collection = await in_worker(collection_get)(account=caller.account, collection_id=arguments["collection_id"])
    hits = await search(collection, arguments["query"], k=int(arguments.get("k", 5)),  # 2.0 is an integer too
                        request_id=caller.request_id)
    return ToolResult.data({"collection_id": collection.pk, "query": arguments["query"], "results": hits})


# -- routines ----------------------------------------------------------------------------------


def _routines(account) -> list[dict[str, Any]]:
    return [routine_summary(r) for r in Routine.objects.filter(account=account).order_by("id")]


async def list_routines(caller: Caller, arguments: dict[str, Any]) -> ToolResult:
    return ToolResult.data({"routines": await in_worker(_routines)(caller.account)})


def _start(account, routine_id: int) -> dict[str, Any]:
    routine = Routine.objects.filter(pk=routine_id, account=account).first()
    if routine is None:
        raise ApiError(404, f"Routine {routine_id} not found.")
    if not routine.is_enabled:
        raise ApiError(422, f"Routine {routine_id} is paused; enable it before starting it.")
    run = start_manual_run(routine)
    return {"routine_id": routine.pk, "run_id": run.pk, "status": run.status, "trigger": run.trigger}


async def start_routine(caller: Caller, arguments: dict[str, Any]) -> ToolResult:
    return ToolResult.data(await in_worker(_start)(caller.account, arguments["routine_id"]))


# -- the list ----------------------------------------------------------------------------------

_ID = {"type": "integer", "minimum": 1}
_NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool(
        "list_models",
        "The models you may use through this gateway, as server/model ids, with what each can do "
        "and which one answers when no model is named.",
        _NO_ARGUMENTS,
        list_models,
    ),
    Tool(
        "chat",
        "Ask a model for a whole reply. Give 'prompt' (one user message) or 'messages' (a "
        "conversation); 'model' is a server/model id from list_models (the default model when "
        "omitted). Metered against your token quota.",
        {
            "type": "object",
            "properties": {
                "model": {"type": "string", "minLength": 1, "description": "server/model, or a bare model name."},
                "prompt": {"type": "string", "minLength": 1},
                "messages": {
                    "type": "array", "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {"role": {"enum": ["system", "user", "assistant"]},
                                       "content": {"type": "string"}},
                        "required": ["role", "content"],
                        "additionalProperties": False,
                    },
                },
                "system": {"type": "string", "description": "A system prompt put before the messages."},
                "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                "max_tokens": {"type": "integer", "minimum": 1},
            },
            "additionalProperties": False,
        },
        chat,
        read_only=False,
    ),
    Tool(
        "search_collection",
        "Search one of your document collections for the passages closest in meaning to 'query'; "
        f"returns up to 'k' passages (default 5, at most {MAX_SEARCH_RESULTS}).",
        {
            "type": "object",
            "properties": {
                "collection_id": _ID,
                "query": {"type": "string", "minLength": 1},
                "k": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS},
            },
            "required": ["collection_id", "query"],
            "additionalProperties": False,
        },
        search_collection,
    ),
    Tool(
        "list_routines",
        "Your routines: id, name, trigger, whether each is enabled, last and next run.",
        _NO_ARGUMENTS,
        list_routines,
    ),
    Tool(
        "start_routine",
        "Queue a run of one of your routines now (like run-now); a paused routine is refused.",
        {"type": "object", "properties": {"routine_id": _ID}, "required": ["routine_id"],
         "additionalProperties": False},
        start_routine,
        read_only=False,
    ),
)}


def listing() -> list[dict[str, Any]]:
    return [tool.listed() for tool in TOOLS.values()]


def agent_tools(names: list[str]) -> list[Tool]:
    """The agent's built-in tools among `names`."""
    return [TOOLS[name] for name in names if name in AGENT_TOOLS]
