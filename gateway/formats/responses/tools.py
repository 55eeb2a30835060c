"""Function tools on the Responses surface <-> chat-completions tools (the neutral form).

Only what runs in the client's own code can be carried: `function` tools, and the function tools
of a `namespace` (their names flattened to `<namespace>__<name>`, split back in the reply). Tools
that run on OpenAI's servers (`web_search`, `file_search`, `mcp`, …) or need its grammar engine
(`custom`) are refused with a 400 naming them, never dropped
(docs/decisions/0107-responses-with-tools.md). Used only when the installation turns RESPONSES_TOOLS on.
"""

from __future__ import annotations

from typing import Any

from gateway.web.errors import ApiError

SEPARATOR = "__"  # <namespace>__<name>: both chat and Anthropic tool names allow [A-Za-z0-9_-]
CHOICES = ("none", "auto", "required")
# A function tool's fields the neutral form has no place for, with the value that asks for nothing.
UNCARRIED = {"defer_loading": False, "output_schema": None, "async": False}


def bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, code="invalid_request_error", param=param)


def _hosted(kind: Any, where: str) -> ApiError:
    if not isinstance(kind, str):
        return bad(f"{where}.type: required, a string.", f"{where}.type")
    hint = ' (Codex CLI: web_search = "disabled" in config.toml)' if kind.startswith("web_search") else ""
    return bad(f"{where}: tools of type {kind!r} are not carried by this gateway (it passes function tools to "
               f"its models, which cannot run OpenAI's hosted tools); leave it out of the request{hint}.", where)


def _function(tool: dict, where: str, name: str, note: str = "") -> dict:
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise bad(f"{where}.name: required.", f"{where}.name")
    for field, nothing in UNCARRIED.items():
        if tool.get(field, nothing) not in (nothing, None):
            raise bad(f"{where}.{field}: not supported by this gateway.", f"{where}.{field}")
    if tool.get("allowed_callers") not in (None, ["direct"]):
        raise bad(f"{where}.allowed_callers: only direct calls are supported.", f"{where}.allowed_callers")
    parameters = tool.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise bad(f"{where}.parameters: must be an object.", f"{where}.parameters")
    function: dict[str, Any] = {"name": name, "parameters": parameters or {"type": "object", "properties": {}}}
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise bad(f"{where}.description: must be a string.", f"{where}.description")
    if description or note:
        function["description"] = "\n\n".join(text for text in (note, description) if text)
    if isinstance(tool.get("strict"), bool):
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def chat_tools(tools: list) -> list[dict]:
    """The request's `tools` as chat tools; a namespace's functions each become one, named
    `<namespace>__<name>` and described with the namespace's description first."""
    out: list[dict] = []
    for i, tool in enumerate(tools):
        where = f"tools.{i}"
        if not isinstance(tool, dict):
            raise bad(f"{where}: must be an object.", where)
        kind = tool.get("type")
        if kind == "function":
            out.append(_function(tool, where, tool.get("name")))
        elif kind == "namespace":
            space = tool.get("name")
            if not isinstance(space, str) or not space or not isinstance(tool.get("tools"), list):
                raise bad(f"{where}: a namespace needs a name and a list of tools.", where)
            note = f"({space}: {tool['description']})" if isinstance(tool.get("description"), str) else ""
            for j, member in enumerate(tool["tools"]):
                if _obj(member).get("type") != "function":
                    raise _hosted(_obj(member).get("type"), f"{where}.tools.{j}")
                out.append(_function(member, f"{where}.tools.{j}", f"{space}{SEPARATOR}{member.get('name')}", note))
        else:
            raise _hosted(kind, where)
    names = [tool["function"]["name"] for tool in out]
    if len(set(names)) != len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise bad(f"tools: the function name {twice!r} is given twice (a namespace's functions are named "
                  f"<namespace>{SEPARATOR}<name>).", "tools")
    return out


def namespaced(tools: Any) -> dict[str, tuple[str, str]]:
    """Chat name -> (namespace, name) of the request's namespaced functions, to split replies' calls."""
    found: dict[str, tuple[str, str]] = {}
    for tool in tools if isinstance(tools, list) else ():
        if _obj(tool).get("type") == "namespace" and isinstance(tool.get("tools"), list):
            for member in tool["tools"]:
                name = _obj(member).get("name")
                if isinstance(name, str):
                    found[f"{tool['name']}{SEPARATOR}{name}"] = (tool["name"], name)
    return found


def chat_tool_choice(choice: Any, tools: list[dict]) -> tuple[Any, list[dict]]:
    """`tool_choice` in the chat form, and the tools left once `allowed_tools` has narrowed them."""
    names = {tool["function"]["name"] for tool in tools}
    if choice is None or choice in CHOICES:
        return choice, tools
    kind = _obj(choice).get("type")
    if kind == "function":
        name = choice.get("name")
        if name not in names:
            raise bad(f"tool_choice.name: {name!r} is not one of the request's function tools.", "tool_choice.name")
        return {"type": "function", "function": {"name": name}}, tools
    if kind == "allowed_tools" and choice.get("mode") in ("auto", "required") and isinstance(choice.get("tools"), list):
        allowed = set()
        for k, entry in enumerate(choice["tools"]):
            if _obj(entry).get("type") != "function":
                raise _hosted(_obj(entry).get("type"), f"tool_choice.tools.{k}")
            allowed.add(entry.get("name"))
        if not allowed <= names:
            raise bad(f"tool_choice.tools: {sorted(map(str, allowed - names))} are not among the request's "
                      "function tools.", "tool_choice.tools")
        return choice["mode"], [tool for tool in tools if tool["function"]["name"] in allowed]
    if kind in (None, "allowed_tools"):
        raise bad("tool_choice: must be 'none', 'auto', 'required', a function or allowed_tools.", "tool_choice")
    raise _hosted(kind, "tool_choice")


def function_call(item: dict, where: str) -> dict:
    """A `function_call` input item as a chat tool call."""
    for field in ("call_id", "name", "arguments"):
        if not isinstance(item.get(field), str):
            raise bad(f"{where}.{field}: must be a string.", f"{where}.{field}")
    name = item["name"]
    if isinstance(item.get("namespace"), str) and item["namespace"]:
        name = f"{item['namespace']}{SEPARATOR}{name}"
    return {"id": item["call_id"], "type": "function", "function": {"name": name, "arguments": item["arguments"]}}


def function_output(item: dict, where: str) -> tuple[dict, list[dict]]:
    """A `function_call_output` input item as a chat tool message, and the images it returned
    (a tool message carries text only; they follow as a user message)."""
    if not isinstance(item.get("call_id"), str):
        raise bad(f"{where}.call_id: must be a string.", f"{where}.call_id")
    output = item.get("output")
    texts, images = [], []
    if isinstance(output, str):
        texts.append(output)
    elif isinstance(output, list):
        for k, part in enumerate(output):
            kind = _obj(part).get("type")
            if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "input_image" and isinstance(part.get("image_url"), str):
                images.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
            else:
                raise ApiError(501, f"{where}.output.{k}: tool output parts of type {kind!r} are not supported; "
                               "send text or an image_url.", code="unsupported")
    else:
        raise bad(f"{where}.output: must be a string or a list of content parts.", f"{where}.output")
    return {"role": "tool", "tool_call_id": item["call_id"], "content": "\n".join(texts)}, images


def output_call(call: dict, *, item_id: str, spaces: dict[str, tuple[str, str]], status: str) -> dict:
    """A chat tool call of the reply as a `function_call` output item (namespaced names split back)."""
    function = _obj(call.get("function"))
    name = function.get("name") or ""
    item: dict[str, Any] = {"type": "function_call", "id": item_id, "call_id": call.get("id") or f"call_{item_id}",
                            "name": name, "arguments": function.get("arguments") or "", "status": status}
    if name in spaces:
        item["namespace"], item["name"] = spaces[name]
    return item


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}
