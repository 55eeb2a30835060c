"""The built-in tools of the agent: search one of the caller's collections, start one of the
caller's routines (a paused one is refused, as run-now refuses it). Another account's id is
answered like an id that does not exist. A search is metered with the agent request's id."""

from __future__ import annotations

import json
from typing import Any


from gateway.errors import ApiError
from gateway.workers import in_worker
from native.models import Collection
from native.tools import Tool, ToolError

SEARCH_COLLECTION = "search_collection"
START_ROUTINE = "start_routine"
BUILTIN_NAMES = (SEARCH_COLLECTION, START_ROUTINE)
SEARCH_RESULTS = 5

_SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "collection_id": {"type": "integer", "description": "The id of one of the user's collections."},
        "query": {"type": "string", "description": "What to look for."},
    },
    "required": ["collection_id", "query"],
}
_START_PARAMETERS = {
    "type": "object",
    "properties": {"routine_id": {"type": "integer", "description": "The id of one of the user's routines."}},
    "required": ["routine_id"],
}


def builtin_tools(account_id: int, names: list[str], *, request_id: str = "") -> list[Tool]:
    tools = {
        SEARCH_COLLECTION: Tool(
            SEARCH_COLLECTION, "Search one of the user's document collections; returns the best matching passages.",
            _SEARCH_PARAMETERS, lambda arguments: search_collection_tool(account_id, arguments, request_id)),
        START_ROUTINE: Tool(
            START_ROUTINE, "Start one of the user's routines now; returns the queued run.",
            _START_PARAMETERS, lambda arguments: start_routine_tool(account_id, arguments)),
    }
    return [tools[name] for name in names if name in tools]


def _id_argument(arguments: dict[str, Any], name: str) -> int:
    value = arguments.get(name)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ToolError(f"'{name}' must be a positive integer.")
    return value


async def search_collection_tool(account_id: int, arguments: dict[str, Any], request_id: str = "") -> str:
    collection_id = _id_argument(arguments, "collection_id")
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError("'query' must be a non-empty string.")
    collection = await in_worker(_own_collection)(account_id, collection_id)
    from native.search import search_collection

    try:
        hits = await search_collection(collection, query, k=SEARCH_RESULTS, request_id=request_id)
    except ApiError as failure:
        raise ToolError(failure.message) from None
    return json.dumps(hits, ensure_ascii=False, default=str)


def _own_collection(account_id: int, collection_id: int) -> Collection:
    collection = Collection.objects.filter(pk=collection_id, account_id=account_id).first()
    if collection is None:
        raise ToolError(f"Collection {collection_id} does not exist.")
    return collection


async def start_routine_tool(account_id: int, arguments: dict[str, Any]) -> str:
    routine_id = _id_argument(arguments, "routine_id")
    return await in_worker(_start_routine)(account_id, routine_id)


def _start_routine(account_id: int, routine_id: int) -> str:
    """Like run-now: a paused routine is refused."""
    from routines.models import Routine
    from routines.routine_writes import routine_run_now

    routine = Routine.objects.filter(pk=routine_id, account_id=account_id).first()
    if routine is None:
        raise ToolError(f"Routine {routine_id} does not exist.")
    if not routine.is_enabled:
        raise ToolError(f"Routine {routine_id} is paused; enable it before starting it.")
    run = routine_run_now(routine=routine)
    return json.dumps({"routine_id": routine.pk, "run_id": run.pk, "status": run.status})
