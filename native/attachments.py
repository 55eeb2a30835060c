"""Attachments of a native chat message: text files and images, checked and turned into the
content parts of a chat-completions message.

An attachment is `{name, content_type, text}` (a text file given as text) or
`{name, content_type, data}` (base64: a text file in UTF-8, or an image). Images go to the model
as OpenAI `image_url` parts holding a data URL; a text file goes as a text part that names it.
The group's count per message is checked by the caller (403); a bad attachment is a 422.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from django.conf import settings

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
TEXT_TYPES = frozenset({
    "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/javascript",
    "application/x-sh", "application/sql", "application/toml", "application/x-ndjson",
})
MAX_NAME_CHARS = 255


@dataclass(frozen=True)
class Attachment:
    name: str
    content_type: str
    size: int  # bytes received (decoded)
    text: str | None = None  # a text file
    data: str | None = None  # an image, base64 as sent

    @property
    def is_image(self) -> bool:
        return self.data is not None

    def content_part(self) -> dict[str, Any]:
        """The attachment as a chat-completions content part."""
        if self.is_image:
            return {"type": "image_url", "image_url": {"url": f"data:{self.content_type};base64,{self.data}"}}
        return text_part(self.name, self.text or "")

    def stored(self) -> dict[str, Any]:
        """What the conversation keeps: a text file whole (later turns send it again), an image
        by its name, type and size only."""
        kept: dict[str, Any] = {"name": self.name, "content_type": self.content_type, "size": self.size}
        if not self.is_image:
            kept["text"] = self.text
        return kept


def text_part(name: str, text: str) -> dict[str, str]:
    return {"type": "text", "text": f"Attached file {name}:\n{text}"}


def stored_parts(stored: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The text files of a saved message as content parts (images of earlier turns are not sent again)."""
    return [text_part(a.get("name", ""), a["text"]) for a in stored if isinstance(a, dict) and "text" in a]


def parse_attachments(items: list[Any]) -> tuple[list[Attachment], dict[str, list[str]]]:
    """The attachments, and the problems found, keyed `attachments.<index>`."""
    parsed: list[Attachment] = []
    errors: dict[str, list[str]] = {}
    for index, item in enumerate(items):
        try:
            parsed.append(_parse(item))
        except ValueError as problem:
            errors[f"attachments.{index}"] = [str(problem)]
    return parsed, errors


def _parse(item: Any) -> Attachment:
    if not isinstance(item, dict):
        raise ValueError("An attachment must be an object with name, content_type and text or data.")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise ValueError(f"'name' must be a non-empty string of at most {MAX_NAME_CHARS} characters.")
    if not _storable(name):  # also refused at the edge (gateway/web/body.py); the name is stored
        raise ValueError("'name' must not hold a NUL character or a lone surrogate.")
    raw_type = item.get("content_type")
    if not isinstance(raw_type, str) or not raw_type.strip():
        raise ValueError("'content_type' is required.")
    content_type = raw_type.split(";", 1)[0].strip().lower()
    text, data = item.get("text"), item.get("data")
    if (text is None) == (data is None):
        raise ValueError("Send exactly one of 'text' and 'data' (base64).")
    if content_type.startswith("image/"):
        if content_type not in IMAGE_TYPES:
            raise ValueError(f"Images must be one of {', '.join(sorted(IMAGE_TYPES))}.")
        if data is None:
            raise ValueError("An image is sent as base64 in 'data'.")
        raw = _decoded(data)
        return Attachment(name=name, content_type=content_type, size=len(raw), data="".join(data.split()))
    if not (content_type.startswith("text/") or content_type in TEXT_TYPES):
        raise ValueError(f"Files of type '{content_type}' are not accepted: send text files or images.")
    if data is not None:
        raw = _decoded(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("A text file must be UTF-8.") from None
        if "\x00" in text:  # the text is stored with the message, and PostgreSQL stores no NUL
            raise ValueError("A text file must not hold NUL characters.")
    elif not isinstance(text, str):
        raise ValueError("'text' must be a string.")
    elif not _storable(text):
        raise ValueError("'text' must not hold a NUL character or a lone surrogate.")
    size = len(text.encode("utf-8"))
    if size > settings.CHAT_ATTACHMENT_MAX_BYTES:
        raise ValueError(f"An attachment may be at most {settings.CHAT_ATTACHMENT_MAX_BYTES} bytes.")
    if len(text) > settings.CHAT_ATTACHMENT_MAX_CHARS:
        raise ValueError(f"A text file may be at most {settings.CHAT_ATTACHMENT_MAX_CHARS} characters.")
    return Attachment(name=name, content_type=content_type, size=size, text=text)


def _storable(text: str) -> bool:
    """No NUL (PostgreSQL refuses it in text and JSON) and no lone surrogate (not UTF-8)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _decoded(data: Any) -> bytes:
    if not isinstance(data, str) or not data:
        raise ValueError("'data' must be a non-empty base64 string.")
    limit = settings.CHAT_ATTACHMENT_MAX_BYTES
    if len(data) > (limit + 2) // 3 * 4 + len(data) // 76 * 2 + 4:  # too big before decoding it
        raise ValueError(f"An attachment may be at most {limit} bytes.")
    try:
        raw = base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("'data' is not valid base64.") from None
    if len(raw) > limit:
        raise ValueError(f"An attachment may be at most {limit} bytes.")
    return raw
