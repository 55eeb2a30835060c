"""The neutral chat form (OpenAI Chat Completions dicts) -> a Gemini generateContent /
streamGenerateContent request body, for the Gemini API and Vertex AI alike (the same body; the model
goes in the path). What the request cannot hold is named in `lost`, as the Anthropic translation does
(gateway/formats/anthropic/to_chat.py, module docstring), so the provider can refuse it or, for a
server that drops unsupported fields, leave it out.

Messages become `contents` (roles user and model, a turn per run of one role) and `systemInstruction`
(the system and developer messages); tool calls become functionCall parts and tool results
functionResponse parts, which Gemini matches by the function's name (the chat form's result names only
its call's id, so the name is found from the call). A call's thought signature, which Gemini 3 wants
back with the call, comes back in the call's id (`parts.call_id`)."""

from __future__ import annotations

from typing import Any

from gateway.formats.anthropic.from_chat import MESSAGE_KEYS, NEUTRAL, OUTPUT_TOOL_DESCRIPTION, output_tool_name
from gateway.formats.anthropic.to_chat import TOOL_ERROR_PREFIX, as_object, asks_for, bad_request
from gateway.formats.gemini import config, parts

# Top-level chat fields carried (as what: chat_to_gemini_request and config.py); Gemini's own fields
# a client may send as extra fields (`top_k`, `cached_content`, `safety_settings`); prompt-caching hints,
# which need no place (Gemini caches implicitly); and `metadata`, the call's tags, which the gateway
# keeps with the call: they ask nothing of the model.
CARRIED = frozenset({"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
                     "temperature", "top_p", "top_k", "stop", "n", "seed", "presence_penalty", "frequency_penalty",
                     "response_format", "reasoning_effort", "tools", "tool_choice", "parallel_tool_calls", "user",
                     "safety_identifier", "service_tier", "cached_content", "safety_settings", "prompt_cache_key",
                     "prompt_cache_retention", "prompt_cache_options", "metadata", "logprobs", "top_logprobs"})
CHOICE_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def gemini_request_uncarried(body: dict) -> list[str]:
    """The names of the fields of a chat request that a generateContent request cannot carry."""
    lost: list[str] = []
    chat_to_gemini_request(body, lost=lost)
    return lost


def chat_to_gemini_request(body: dict, *, lost: list[str]) -> dict:
    """The generateContent form of a chat request (no `model`: it goes in the path, but the body's
    `model` says which thinking settings apply). The names of what it leaves out go to `lost`."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages: a non-empty list of messages is required.")
    for key, value in body.items():
        if key not in CARRIED and value is not None and not NEUTRAL.get(key, lambda v: False)(value):
            lost.append(key)
    turns = _Turns(lost, signatures_needed=_gemini_3(body.get("model")))
    for i, message in enumerate(messages):
        turns.add(message, f"messages.{i}")
    if not turns.contents:
        raise bad_request("messages: at least one user or assistant message with content is required.")
    req: dict[str, Any] = {"contents": turns.contents}
    if turns.system:
        req["systemInstruction"] = {"parts": turns.system}
    output = gemini_output_tool(body)
    _tools(body, req, output, lost)
    if generation := config.generation_config(body, lost, native_format=output is None):
        req["generationConfig"] = generation
    config.request_fields(body, req, lost)
    return req


def gemini_output_tool(body: dict) -> str | None:
    """The function that carries the request's `response_format` (its call's arguments are the reply:
    `GeminiToChatStream(output_tool=...)`), or None. Gemini holds its output to a JSON schema itself,
    except that before Gemini 3 it takes no JSON output beside function declarations ("Function calling
    with a response mime type: 'application/json' is unsupported"): then the format goes by a function
    the model must call to answer, as it goes by a tool for Anthropic's models."""
    kind = as_object(body.get("response_format")).get("type")
    if kind not in ("json_object", "json_schema") or not body.get("tools") or _gemini_3(body.get("model")):
        return None
    return output_tool_name(body)


def _gemini_3(model: Any) -> bool:
    """Gemini 3 refuses a function call of the current turn without its thought signature, and takes
    JSON output beside functions."""
    name = model.rsplit("/", 1)[-1].lower() if isinstance(model, str) else ""
    return name.startswith("gemini-3")


class _Turns:
    """What one request's messages become."""

    def __init__(self, lost: list[str], *, signatures_needed: bool) -> None:
        self.lost, self.signatures_needed = lost, signatures_needed
        self.system: list[dict] = []
        self.contents: list[dict] = []
        self._names: dict[str, str] = {}  # chat tool call id → function name, for the results

    def add(self, message: Any, where: str) -> None:
        role = message.get("role") if isinstance(message, dict) else None
        if role is not None:
            self.lost.extend(f"{where}.{key}" for key, value in message.items()
                             if key not in MESSAGE_KEYS and asks_for(value))
        if role in ("system", "developer"):
            self.system += parts.text_parts(message.get("content"), f"{where}.content")
            return
        if role == "user":
            found, role = parts.user_parts(message.get("content"), where, self.lost), "user"
        elif role == "assistant":
            found, role = self._model_parts(message, where), "model"
        elif role == "tool":
            found, role = [self._function_response(message, where)], "user"
        else:
            raise bad_request(f"{where}.role: unsupported role {role!r}.")
        if not found:
            return
        if self.contents and self.contents[-1]["role"] == role:  # one turn per run of a role
            self.contents[-1]["parts"].extend(found)
        else:
            self.contents.append({"role": role, "parts": found})
        if role == "user":  # function responses lead their turn, as the calls they answer led theirs
            self.contents[-1]["parts"].sort(key=lambda part: "functionResponse" not in part)

    def _model_parts(self, message: dict, where: str) -> list[dict]:
        """Text and function calls. Reasoning (`reasoning_content`) is left out: it is earlier output,
        and Gemini takes its thoughts back only as the signatures it made."""
        found = parts.text_parts(message.get("content"), f"{where}.content")
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise bad_request(f"{where}.tool_calls: must be a list.")
        signed = False
        for k, call in enumerate(calls):
            function = as_object(as_object(call).get("function"))
            if not isinstance(function.get("name"), str) or not function["name"]:
                raise bad_request(f"{where}.tool_calls.{k}.function.name: required.")
            arguments = parts.call_arguments(function.get("arguments"), f"{where}.tool_calls.{k}.function.arguments")
            part: dict[str, Any] = {"functionCall": {"name": function["name"], "args": arguments}}
            chat_id = call.get("id")
            signature = parts.split_call_id(chat_id)[1] if isinstance(chat_id, str) else None
            if signature is None and self.signatures_needed and not signed:
                signature = parts.SKIP_SIGNATURE  # the first call of a step carries the step's signature
            if signature is not None:
                part["thoughtSignature"] = signature
                signed = True
            if isinstance(chat_id, str):
                self._names[chat_id] = function["name"]
            found.append(part)
        return found

    def _function_response(self, message: dict, where: str) -> dict:
        """A tool message as a functionResponse: its text as the `output`, or as the `error` when it
        reads as a failure (the chat form's `Error: ` prefix, as a Messages client's is_error reads)."""
        chat_id = message.get("tool_call_id")
        if not isinstance(chat_id, str):
            raise bad_request(f"{where}.tool_call_id: required.")
        name = self._names.get(chat_id)
        if name is None:
            raise bad_request(f"{where}.tool_call_id: {chat_id!r} answers no tool call of an earlier assistant "
                              "message; this model needs the call to know the function's name.")
        text = "\n".join(part["text"] for part in parts.text_parts(message.get("content"), f"{where}.content"))
        key = "error" if text.startswith(TOOL_ERROR_PREFIX) else "output"
        return {"functionResponse": {"name": name, "response": {key: text}}}


def _tools(body: dict, req: dict, output: str | None, lost: list[str]) -> None:
    """tools → one functionDeclarations tool; tool_choice → toolConfig.functionCallingConfig; and the
    `output` function (`gemini_output_tool`), which the model must call when no other: every call is
    asked for (ANY) where the choice was free, the output function alone where it was "none"."""
    declarations = [_declaration(tool, k) for k, tool in enumerate(body.get("tools") or [])]
    choice = body.get("tool_choice")
    if isinstance(choice, str) and choice in CHOICE_MODES:
        calling: dict[str, Any] | None = {"mode": CHOICE_MODES[choice]}
    elif isinstance(as_object(as_object(choice).get("function")).get("name"), str):
        calling = {"mode": "ANY", "allowedFunctionNames": [choice["function"]["name"]]}
    elif choice is None:
        calling = None
    else:
        raise bad_request("tool_choice: must be 'auto', 'required', 'none' or a named function.")
    if output is not None:
        fmt = as_object(body.get("response_format"))
        described = as_object(fmt.get("json_schema"))
        schema = described.get("schema") if fmt.get("type") == "json_schema" else None
        declarations.append({"name": output, "description": described.get("description") or OUTPUT_TOOL_DESCRIPTION,
                             "parametersJsonSchema": schema or {"type": "object"}})
        if calling is None or calling == {"mode": "AUTO"}:
            calling = {"mode": "ANY"}
        elif calling["mode"] == "NONE":
            calling = {"mode": "ANY", "allowedFunctionNames": [output]}
    if not declarations:
        return
    req["tools"] = [{"functionDeclarations": declarations}]
    if calling is not None:
        req["toolConfig"] = {"functionCallingConfig": calling}
    if body.get("parallel_tool_calls") is False and (calling or {}).get("mode") != "NONE":
        lost.append("parallel_tool_calls")  # Gemini cannot ask for one call at a time


def _declaration(tool: Any, k: int) -> dict:
    """A function tool as a FunctionDeclaration, its JSON Schema as it is (`parametersJsonSchema`,
    not the OpenAPI subset `parameters` takes)."""
    function = as_object(as_object(tool).get("function"))
    if as_object(tool).get("type") != "function" or not isinstance(function.get("name"), str):
        raise bad_request(f"tools.{k}: only function tools with a name are supported.")
    declaration: dict[str, Any] = {"name": function["name"]}
    if function.get("description"):
        declaration["description"] = function["description"]
    if function.get("parameters"):
        declaration["parametersJsonSchema"] = function["parameters"]
    return declaration
