"""The chat form's messages as Converse's `system` blocks and `messages` turns. Converse takes no
blank text block, no URL to fetch (images and documents go as bytes, or as an S3 location), and no
toolUse or toolResult block unless the request offers tools: when it offers none (or `tool_choice` is
"none", which Converse cannot say), the tool calls and results of the history are told as text."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gateway.formats.anthropic.to_chat import TOOL_ERROR_PREFIX, as_object, asks_for, bad_request, parse_arguments
from gateway.formats.converse import families

MESSAGE_KEYS = frozenset({"role", "content", "tool_call_id", "tool_calls", "refusal", "annotations",
                          "reasoning_content", "reasoning", "cache_control"})
IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif",
                 "image/webp": "webp"}
IMAGE_EXTENSIONS = {"png": "png", "jpg": "jpeg", "jpeg": "jpeg", "gif": "gif", "webp": "webp"}
DOCUMENT_FORMATS = {
    "application/pdf": "pdf", "text/csv": "csv", "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html", "text/plain": "txt", "text/markdown": "md",
}
AUDIO_FORMATS = frozenset({"mp3", "opus", "wav", "aac", "flac", "mp4", "ogg", "mkv", "mka", "x-aac", "m4a", "mpeg",
                           "mpga", "pcm", "webm"})
EMPTY_TOOL_RESULT = "(no output)"  # Converse refuses a blank text block, and a toolResult needs content
_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_.:-]")
_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9\s\-()\[\]]")


@dataclass
class Conversation:
    """What one request's messages become, and what they need along the way."""

    kind: str  # the model's family (families.py)
    lost: list[str]
    tools_offered: bool  # toolUse and toolResult blocks may be sent
    system: list[dict] = field(default_factory=list)
    turns: list[dict] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)  # document names so far (Converse wants them distinct)
    _calls: dict[str, str] = field(default_factory=dict)  # tool call id → tool name, for results told as text

    def add(self, message: Any, where: str) -> None:
        role = message.get("role") if isinstance(message, dict) else None
        if role is not None:
            self.lost.extend(f"{where}.{key}" for key, value in message.items()
                             if key not in MESSAGE_KEYS and asks_for(value))
        if role in ("system", "developer"):
            self.system += self._marked(self._texts(message.get("content"), f"{where}.content"), message)
            return
        if role == "user":
            blocks, role = self._user(message.get("content"), where), "user"
        elif role == "assistant":
            blocks = self._assistant(message, where)
        elif role == "tool":
            blocks, role = self._tool_result(message, where), "user"
        else:
            raise bad_request(f"{where}.role: unsupported role {role!r}.")
        blocks = self._marked(blocks, message)
        if not any("cachePoint" not in block for block in blocks):
            return
        if self.turns and self.turns[-1]["role"] == role:  # Converse wants the roles to alternate
            self.turns[-1]["content"].extend(blocks)
        else:
            self.turns.append({"role": role, "content": blocks})

    def finish(self) -> None:
        if not self.turns:
            raise bad_request("messages: at least one user or assistant message with content is required.")
        for turn in self.turns:  # tool results lead their user turn, each with the cachePoint behind it
            if turn["role"] == "user":
                groups: list[list[dict]] = []
                for block in turn["content"]:
                    if "cachePoint" in block and groups:
                        groups[-1].append(block)
                    else:
                        groups.append([block])
                groups.sort(key=lambda group: "toolResult" not in group[0])
                turn["content"] = [block for group in groups for block in group]

    # ------------------------------------------------------------------------- content

    def _marked(self, blocks: list[dict], message: dict) -> list[dict]:
        """A message's `cache_control` (Anthropic-style clients mark a whole message) after its blocks."""
        point = families.cache_point(self.kind, message.get("cache_control"))
        return [*blocks, point] if point and blocks else blocks

    def _point_after(self, blocks: list[dict], part: Any) -> None:
        point = families.cache_point(self.kind, as_object(part).get("cache_control"))
        if point and blocks and "cachePoint" not in blocks[-1]:
            blocks.append(point)

    def _texts(self, content: Any, where: str) -> list[dict]:
        """Text (and refusal) parts as text blocks, each with its cachePoint; any other part is malformed."""
        if content is None or isinstance(content, str):
            return [{"text": content}] if content and content.strip() else []
        if not isinstance(content, list):
            raise bad_request(f"{where}: must be a string or a list of content parts.")
        blocks: list[dict] = []
        for k, part in enumerate(content):
            kind = as_object(part).get("type")
            text = part.get("text") if kind == "text" else part.get("refusal") if kind == "refusal" else None
            if not isinstance(text, str):
                raise bad_request(f"{where}.{k}: only text parts are allowed here.")
            if text.strip():
                blocks.append({"text": text})
                self._point_after(blocks, part)
        return blocks

    def _user(self, content: Any, where: str) -> list[dict]:
        if content is None or isinstance(content, str):
            return self._texts(content, f"{where}.content")
        if not isinstance(content, list):
            raise bad_request(f"{where}.content: must be a string or a list of content parts.")
        blocks: list[dict] = []
        for k, part in enumerate(content):
            kind, at = as_object(part).get("type"), f"{where}.content.{k}"
            if kind == "text" and isinstance(part.get("text"), str):
                block = {"text": part["text"]} if part["text"].strip() else None
            elif kind == "image_url":
                image = part.get("image_url")
                block = self._image(image.get("url") if isinstance(image, dict) else image, at)
            elif kind == "file":
                block = self._file(as_object(part.get("file")), at)
            elif kind == "input_audio":
                block = self._audio(as_object(part.get("input_audio")), at)
            elif isinstance(kind, str) and kind != "text":
                self.lost.append(f"{at} ({kind})")  # video, a later part type
                block = None
            else:
                raise bad_request(f"{at}.type: content parts of type {kind!r} cannot be sent to this model.")
            if block is not None:
                blocks.append(block)
                self._point_after(blocks, part)
        return blocks

    def _image(self, url: Any, at: str) -> dict | None:
        if isinstance(url, str) and url.startswith("data:"):
            media, data = _data_url(url)
            if data is not None:
                if media not in IMAGE_FORMATS:
                    self.lost.append(f"{at}.image_url ({media})")
                    return None
                return {"image": {"format": IMAGE_FORMATS[media], "source": {"bytes": data}}}
        elif isinstance(url, str) and url.startswith("s3://"):
            extension = url.rsplit(".", 1)[-1].lower() if "." in url.rsplit("/", 1)[-1] else ""
            if extension in IMAGE_EXTENSIONS:
                return {"image": {"format": IMAGE_EXTENSIONS[extension], "source": {"s3Location": {"uri": url}}}}
            self.lost.append(f"{at}.image_url (s3)")
            return None
        elif isinstance(url, str) and url.startswith(("http://", "https://")):
            self.lost.append(f"{at}.image_url (url)")  # Converse fetches nothing: bytes or S3 only
            return None
        raise bad_request(f"{at}.image_url.url: must be an http(s) URL or a base64 data URL.")

    def _file(self, file: dict, at: str) -> dict | None:
        """An inline file (a base64 data URL): a document, or an image; None for an uploaded file."""
        media, data = _data_url(file.get("file_data"))
        if data is None:
            self.lost.append(f"{at} (file)")
            return None
        if media in IMAGE_FORMATS:
            return {"image": {"format": IMAGE_FORMATS[media], "source": {"bytes": data}}}
        if media not in DOCUMENT_FORMATS:
            self.lost.append(f"{at}.file ({media})")
            return None
        return {"document": {"format": DOCUMENT_FORMATS[media], "name": self._document_name(file.get("filename")),
                             "source": {"bytes": data}}}

    def _document_name(self, filename: Any) -> str:
        """Converse's document name: letters, digits, single spaces, hyphens, parentheses and square
        brackets (no dot: the extension goes), distinct within the request."""
        stem = filename.rsplit(".", 1)[0] if isinstance(filename, str) and "." in filename[1:] else filename
        name = " ".join(_NAME_UNSAFE.sub(" ", stem if isinstance(stem, str) else "").split())[:180] or "document"
        unique, n = name, 1
        while unique in self._names:
            n += 1
            unique = f"{name} ({n})"
        self._names.add(unique)
        return unique

    def _audio(self, audio: dict, at: str) -> dict | None:
        if not isinstance(audio.get("data"), str) or not audio["data"]:
            raise bad_request(f"{at}.input_audio.data: must be base64 audio.")
        if audio.get("format") not in AUDIO_FORMATS:
            self.lost.append(f"{at} (input_audio)")
            return None
        return {"audio": {"format": audio["format"], "source": {"bytes": audio["data"]}}}

    # ------------------------------------------------------------------------- tools

    def _assistant(self, message: dict, where: str) -> list[dict]:
        """Text and tool calls. Reasoning (`reasoning_content`) is left out: it is earlier output, and
        Claude takes thinking back only with the signature it made."""
        blocks = self._texts(message.get("content"), f"{where}.content")
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise bad_request(f"{where}.tool_calls: must be a list.")
        for k, call in enumerate(calls):
            function = as_object(as_object(call).get("function"))
            if not isinstance(function.get("name"), str):
                raise bad_request(f"{where}.tool_calls.{k}.function.name: required.")
            call_id = tool_use_id(str(call.get("id") or f"call_{where}_{k}"))
            arguments = parse_arguments(function.get("arguments"))
            self._calls[call_id] = function["name"]
            if self.tools_offered:
                blocks.append({"toolUse": {"toolUseId": call_id, "name": function["name"], "input": arguments}})
            else:
                said = json.dumps(arguments, ensure_ascii=False)
                blocks.append({"text": f"[tool call {call_id}: {function['name']} {said}]"})
        return blocks

    def _tool_result(self, message: dict, where: str) -> list[dict]:
        """A tool message as a toolResult (its text parts one text block each). A failure is said in
        the chat form by the text's `Error: ` prefix (how a Messages client's is_error reads there):
        `status: "error"` where the family takes a status."""
        if not isinstance(message.get("tool_call_id"), str):
            raise bad_request(f"{where}.tool_call_id: required.")
        blocks = self._texts(message.get("content"), f"{where}.content")
        texts = [block["text"] for block in blocks if "text" in block]
        points = [block for block in blocks if "cachePoint" in block][-1:]  # a marked part: after the result
        call_id = tool_use_id(message["tool_call_id"])
        if not self.tools_offered:
            name = self._calls.get(call_id, "a tool")
            said = "\n".join(texts) or EMPTY_TOOL_RESULT
            return [{"text": f"[tool result {call_id} of {name}]\n{said}"}, *points]
        result: dict[str, Any] = {"toolUseId": call_id,
                                  "content": [{"text": text} for text in texts] or [{"text": EMPTY_TOOL_RESULT}]}
        if texts and texts[0].startswith(TOOL_ERROR_PREFIX) and self.kind in families.TOOL_STATUS:
            result["status"] = "error"
        return [{"toolResult": result}, *points]


def tool_use_id(value: str) -> str:
    """A tool call id as Converse takes it: [a-zA-Z0-9_.:-], at most 64 characters (the same id for
    the call and its result)."""
    return _ID_UNSAFE.sub("_", value)[:64] or "call"


def _data_url(url: Any) -> tuple[str, str | None]:
    """(media type, base64 data) of a base64 data URL; data None for anything else."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return "", None
    head, comma, data = url[5:].partition(",")
    if not comma or not head.endswith(";base64") or not data:
        return "", None
    return head.split(";", 1)[0].lower(), data
