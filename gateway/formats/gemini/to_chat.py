"""Gemini's generateContent request -> the neutral chat form, for the Gemini surface
(compat/gemini.py) when the answering server does not speak Gemini's format.

Google's JSON takes a field in camelCase or snake_case (proto3 JSON); both are read. What the chat
form cannot carry (other tools than functions, safety settings above "block none", cached content,
audio or image output...) is named in `lost`, as the client spelled it, and refused by name by a
server that cannot drop it (gateway/upstream/providers/base.py `uncarried`). Malformed input is a
400 naming the field. Plain dict building: this runs per request."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from gateway.web.errors import ApiError

CHOICE_MODES = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "auto", "MODE_UNSPECIFIED": "auto"}
EFFORTS = {"MINIMAL": "minimal", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}
# Thresholds that ask nothing of a model that has no safety filter of Google's.
NO_BLOCK = frozenset({"BLOCK_NONE", "OFF", "HARM_BLOCK_THRESHOLD_UNSPECIFIED"})
# generationConfig fields that ask for something the chat form has no place for.
GENERATION_LOST = ("responseModalities", "speechConfig", "mediaResolution", "routingConfig", "modelSelectionConfig",
                   "audioTimestamp", "enableAffectiveDialog", "imageConfig", "enableEnhancedCivicAnswers")
# Top-level fields read here, or that ask nothing of the model (`labels`: the call's tags).
TOP_FIELDS = frozenset({"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings",
                        "labels", "model"})
_CAMEL = re.compile(r"_([a-z])")
_UPPER = re.compile(r"([A-Z])")


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, code="invalid_request_error")


def camel(name: str) -> str:
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


def get(obj: Any, name: str) -> Any:
    """A field of a Google JSON object by its camelCase name, or its snake_case spelling."""
    if not isinstance(obj, dict):
        return None
    if name in obj:
        return obj[name]
    return obj.get(_UPPER.sub(lambda m: "_" + m.group(1).lower(), name))


def model_name(path_model: str) -> str:
    """The gateway's model id from the URL's `{model}`: Google's `models/` prefix dropped."""
    return path_model[len("models/"):] if path_model.startswith("models/") else path_model


def gemini_to_chat_request(body: dict, model: str, *, lost: list[str]) -> dict:
    """The chat form of a generateContent request for `model` (the gateway's id). Names of what
    it cannot carry go to `lost`."""
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    contents = get(body, "contents")
    if not isinstance(contents, list) or not contents:
        raise bad_request("contents: a non-empty list of contents is required.")
    for key, value in body.items():
        if camel(key) not in TOP_FIELDS and value not in (None, "", {}, []):
            lost.append(key)
    messages: list[dict] = []
    system = get(body, "systemInstruction")
    if system is not None:
        text = "".join(_texts(_parts(system, "systemInstruction"), "systemInstruction", lost))
        if text:
            messages.append({"role": "system", "content": text})
    calls = _CallIds()
    for i, content in enumerate(contents):
        messages.extend(_messages(content, i, calls, lost))
    chat: dict[str, Any] = {"model": model, "messages": messages}
    _generation(get(body, "generationConfig"), chat, lost)
    _tools(get(body, "tools"), get(body, "toolConfig"), chat, lost)
    safety = get(body, "safetySettings")
    if isinstance(safety, list) and any(get(s, "threshold") not in NO_BLOCK for s in safety):
        lost.append("safetySettings")
    return chat


class _CallIds:
    """Ids for function calls that came without one (the Gemini API gives none): a response is
    paired with the earliest call of its name still unanswered, so a server that needs ids
    (OpenAI's, Anthropic's) sees matching ones."""

    def __init__(self) -> None:
        self.count = 0
        self.open: list[tuple[str, str]] = []

    def called(self, name: str, given: Any) -> str:
        self.count += 1
        call_id = given if isinstance(given, str) and given else f"call_{self.count}"
        self.open.append((name, call_id))
        return call_id

    def answered(self, name: str, given: Any) -> str:
        if isinstance(given, str) and given:
            self.open = [(n, c) for n, c in self.open if c != given]
            return given
        for k, (open_name, call_id) in enumerate(self.open):
            if open_name == name:
                del self.open[k]
                return call_id
        self.count += 1
        return f"call_{self.count}"


def _parts(content: Any, where: str) -> list:
    if isinstance(content, str):  # the SDKs take a bare string for a content
        return [{"text": content}]
    parts = get(content, "parts")
    if not isinstance(content, dict) or not isinstance(parts, list):
        raise bad_request(f"{where}.parts: a list of parts is required.")
    return parts


def _texts(parts: list, where: str, lost: list[str]) -> list[str]:
    texts = []
    for k, part in enumerate(parts):
        text = get(part, "text")
        if not isinstance(text, str):
            lost.append(f"{where}.parts[{k}]")
        elif not get(part, "thought"):
            texts.append(text)
    return texts


def _messages(content: Any, i: int, calls: _CallIds, lost: list[str]) -> list[dict]:
    where = f"contents[{i}]"
    role = get(content, "role") or "user"
    parts = _parts(content, where)
    if role == "model":
        return [_assistant(parts, where, calls, lost)]
    if role not in ("user", "function", "tool"):
        raise bad_request(f"{where}.role: must be 'user' or 'model'.")
    out: list[dict] = []
    user: list[dict] = []
    for k, part in enumerate(parts):
        if not isinstance(part, dict):
            raise bad_request(f"{where}.parts[{k}]: must be an object.")
        response = get(part, "functionResponse")
        if response is not None:
            name = get(response, "name")
            if not isinstance(name, str):
                raise bad_request(f"{where}.parts[{k}].functionResponse.name: a string is required.")
            result = get(response, "response")
            text = json.dumps(result, ensure_ascii=False) if result is not None else ""
            out.append({"role": "tool", "tool_call_id": calls.answered(name, get(response, "id")), "content": text})
        elif (piece := _user_part(part, f"{where}.parts[{k}]", lost)) is not None:
            user.append(piece)
    if user:
        if all(p["type"] == "text" for p in user):
            out.append({"role": "user", "content": "".join(p["text"] for p in user)})
        else:
            out.append({"role": "user", "content": user})
    return out


def _user_part(part: dict, where: str, lost: list[str]) -> dict | None:
    text = get(part, "text")
    if isinstance(text, str):
        return None if get(part, "thought") else {"type": "text", "text": text}
    inline = get(part, "inlineData")
    if isinstance(inline, dict):
        mime, data = get(inline, "mimeType") or "", get(inline, "data")
        if not isinstance(data, str):
            raise bad_request(f"{where}.inlineData.data: base64 data is required.")
        url = f"data:{mime};base64,{data}"
        if mime.startswith("image/"):
            return {"type": "image_url", "image_url": {"url": url}}
        if mime == "application/pdf":
            filename = get(inline, "displayName") or "document.pdf"
            return {"type": "file", "file": {"file_data": url, "filename": filename}}
        if mime.startswith("text/"):
            return {"type": "text", "text": base64.b64decode(data).decode("utf-8", "replace")}
        lost.append(f"{where}.inlineData ({mime})")
        return None
    file = get(part, "fileData")
    if isinstance(file, dict) and (get(file, "mimeType") or "").startswith("image/") and get(file, "fileUri"):
        return {"type": "image_url", "image_url": {"url": get(file, "fileUri")}}
    lost.append(f"{where} ({next(iter(part), 'empty')})")
    return None


def _assistant(parts: list, where: str, calls: _CallIds, lost: list[str]) -> dict:
    texts: list[str] = []
    tool_calls: list[dict] = []
    for k, part in enumerate(parts):
        call = get(part, "functionCall")
        if isinstance(call, dict):
            name = get(call, "name")
            if not isinstance(name, str):
                raise bad_request(f"{where}.parts[{k}].functionCall.name: a string is required.")
            arguments = json.dumps(get(call, "args") or {}, ensure_ascii=False)
            tool_calls.append({"id": calls.called(name, get(call, "id")), "type": "function",
                               "function": {"name": name, "arguments": arguments}})
        elif isinstance(get(part, "text"), str):
            if not get(part, "thought"):  # the model's earlier thoughts: its own, not the conversation's
                texts.append(get(part, "text"))
        elif isinstance(part, dict) and not set(part) <= {"thoughtSignature", "thought_signature"}:
            lost.append(f"{where}.parts[{k}] ({next(iter(part), 'empty')})")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _number(config: dict, name: str, kinds: tuple[type, ...]) -> Any:
    value = get(config, name)
    if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
        raise bad_request(f"generationConfig.{name}: must be a number.")
    return value


def _generation(config: Any, chat: dict, lost: list[str]) -> None:
    if config is None:
        return
    if not isinstance(config, dict):
        raise bad_request("generationConfig: must be an object.")
    for name, field in (("temperature", "temperature"), ("topP", "top_p"), ("presencePenalty", "presence_penalty"),
                        ("frequencyPenalty", "frequency_penalty")):
        if (value := _number(config, name, (int, float))) is not None:
            chat[field] = value
    for name, field in (("topK", "top_k"), ("maxOutputTokens", "max_tokens"), ("candidateCount", "n"),
                        ("seed", "seed"), ("logprobs", "top_logprobs")):
        if (value := _number(config, name, (int, float))) is not None:
            chat[field] = int(value)
    if chat.get("n") == 1:
        del chat["n"]
    stops = get(config, "stopSequences")
    if stops:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise bad_request("generationConfig.stopSequences: must be a list of strings.")
        chat["stop"] = stops
    if get(config, "responseLogprobs"):
        chat["logprobs"] = True
    _response_format(config, chat, lost)
    _thinking(get(config, "thinkingConfig"), chat)
    for name in GENERATION_LOST:
        value = get(config, name)
        if name == "responseModalities" and isinstance(value, list) and set(value) <= {"TEXT", "text"}:
            continue
        if value not in (None, "", {}, [], False, "MEDIA_RESOLUTION_UNSPECIFIED"):
            lost.append(f"generationConfig.{name}")


def _response_format(config: dict, chat: dict, lost: list[str]) -> None:
    """`responseMimeType: application/json` with `responseJsonSchema` (JSON Schema) or
    `responseSchema` (Google's OpenAPI subset, its types in capitals) -> a JSON-schema
    response_format; without a schema, JSON mode. An enum type (`text/x.enum`) is lost."""
    mime = get(config, "responseMimeType")
    schema = get(config, "responseJsonSchema") or get(config, "_responseJsonSchema")
    if schema is None and get(config, "responseSchema") is not None:
        schema = json_schema(get(config, "responseSchema"))
    if mime in (None, "", "text/plain") and schema is None:
        return
    if mime not in (None, "application/json"):
        lost.append("generationConfig.responseMimeType")
        return
    if isinstance(schema, dict):
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}
    else:
        chat["response_format"] = {"type": "json_object"}


def json_schema(schema: Any) -> Any:
    """Google's Schema (OpenAPI 3.0 subset) as JSON Schema: types in lower case, `nullable` as a
    null type, `propertyOrdering` left out."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        key = camel(key)
        if key == "type" and isinstance(value, str):
            out["type"] = value.lower()
        elif key in ("properties", "defs", "$defs") and isinstance(value, dict):
            out["$defs" if key == "defs" else key] = {k: json_schema(v) for k, v in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = json_schema(value)
        elif key not in ("nullable", "propertyOrdering"):
            out[key] = value
    if schema.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _thinking(config: Any, chat: dict) -> None:
    """thinkingLevel, or a thinking budget in tokens, as a reasoning effort. A budget of -1 (the
    model decides) asks for nothing; 0 turns thinking off where it can be. `includeThoughts` needs no
    field: the reasoning a server streams is shown as thought parts."""
    if not isinstance(config, dict):
        return
    level = get(config, "thinkingLevel")
    budget = get(config, "thinkingBudget")
    if isinstance(level, str) and level.upper() in EFFORTS:
        chat["reasoning_effort"] = EFFORTS[level.upper()]
    elif isinstance(budget, int) and not isinstance(budget, bool) and budget >= 0:
        chat["reasoning_effort"] = ("none" if budget == 0 else "low" if budget <= 2048
                                    else "medium" if budget <= 16384 else "high")


def _tools(tools: Any, config: Any, chat: dict, lost: list[str]) -> None:
    functions: list[dict] = []
    for i, tool in enumerate(tools or ()):
        if not isinstance(tool, dict):
            raise bad_request(f"tools[{i}]: must be an object.")
        for key, value in tool.items():
            if camel(key) != "functionDeclarations":
                if value is not None:
                    lost.append(f"tools[{i}].{key}")
                continue
            for k, declaration in enumerate(value or ()):
                name = get(declaration, "name")
                if not isinstance(name, str):
                    raise bad_request(f"tools[{i}].functionDeclarations[{k}].name: a string is required.")
                schema = get(declaration, "parametersJsonSchema")
                if schema is None:
                    schema = json_schema(get(declaration, "parameters")) or {"type": "object", "properties": {}}
                function = {"name": name, "parameters": schema}
                if isinstance(get(declaration, "description"), str):
                    function["description"] = get(declaration, "description")
                functions.append({"type": "function", "function": function})
    if functions:
        chat["tools"] = functions
    calling = get(config, "functionCallingConfig")
    if not isinstance(calling, dict) or not functions:
        return
    mode = str(get(calling, "mode") or "AUTO").upper()
    if mode not in CHOICE_MODES:
        raise bad_request("toolConfig.functionCallingConfig.mode: must be AUTO, ANY, NONE or VALIDATED.")
    allowed = get(calling, "allowedFunctionNames")
    if mode == "ANY" and isinstance(allowed, list) and len(allowed) == 1:
        chat["tool_choice"] = {"type": "function", "function": {"name": allowed[0]}}
    else:
        chat["tool_choice"] = CHOICE_MODES[mode]
        if allowed:
            lost.append("toolConfig.functionCallingConfig.allowedFunctionNames")
