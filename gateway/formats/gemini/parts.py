"""The chat form's content parts as Gemini's `parts`, and the tool call ids that carry Gemini's thought
signatures through the chat form.

Media: a base64 data URL goes inline (`inlineData {mimeType, data}`); an http(s) or gs:// URL goes as
`fileData {mimeType, fileUri}`, which Gemini fetches itself. `fileData` needs the media type, which the
chat form does not give: it is read from the URL's extension, and a URL without a known one is refused
by name (Gemini would refuse it too, less clearly)."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any
from urllib.parse import urlsplit

from gateway.formats.anthropic.to_chat import as_object, bad_request

# The media types Gemini reads (images, documents, audio, video), by the extension of a URL's path.
EXTENSION_TYPES = {
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp", "gif": "image/gif",
    "heic": "image/heic", "heif": "image/heif",
    "pdf": "application/pdf", "txt": "text/plain", "md": "text/markdown", "html": "text/html", "csv": "text/csv",
    "xml": "text/xml", "json": "application/json",
    "wav": "audio/wav", "mp3": "audio/mp3", "aiff": "audio/aiff", "aac": "audio/aac", "ogg": "audio/ogg",
    "flac": "audio/flac", "m4a": "audio/m4a", "opus": "audio/opus",
    "mp4": "video/mp4", "mpeg": "video/mpeg", "mov": "video/mov", "avi": "video/avi", "webm": "video/webm",
    "wmv": "video/wmv", "flv": "video/x-flv", "3gp": "video/3gpp",
}
# A chat tool call id carries the call's thought signature after this separator, the way LiteLLM writes
# it, so a client that keeps ids (every one does: the tool result names its call) hands it back.
SIGNATURE_SEPARATOR = "__thought__"
# What Gemini takes, on a function call it made no signature for (one of another model's, or from a
# client that rewrote the id), to skip its check of signatures on the models that ask for them.
SKIP_SIGNATURE = "skip_thought_signature_validator"
_URL_SCHEMES = ("http://", "https://", "gs://")
_AUDIO_FORMAT = re.compile(r"[a-z0-9.+-]{1,20}")


def call_id(gemini_id: Any, signature: Any) -> str:
    """The chat tool call id of a Gemini function call: its own id when it has one (else a new one),
    with its thought signature after SIGNATURE_SEPARATOR when it has one. The signature (base64) is
    written URL-safe and unpadded, so that the id keeps to [a-zA-Z0-9_-], which every other wire format
    takes as an id (Anthropic's tool_use ids are of that pattern): a conversation may move on to
    another server."""
    base = gemini_id if isinstance(gemini_id, str) and gemini_id else "call_" + uuid.uuid4().hex[:24]
    if not isinstance(signature, str) or not signature:
        return base
    return f"{base}{SIGNATURE_SEPARATOR}{signature.replace('+', '-').replace('/', '_').rstrip('=')}"


def split_call_id(chat_id: str) -> tuple[str, str | None]:
    """(the id without a signature, the thought signature or None) of a chat tool call id. The signature
    goes back URL-safe, padded, as google-genai itself sends one (proto's JSON takes both alphabets)."""
    base, separator, signature = chat_id.partition(SIGNATURE_SEPARATOR)
    if not separator or not signature:
        return chat_id, None
    return base, signature + "=" * (-len(signature) % 4)


def text_parts(content: Any, where: str) -> list[dict]:
    """Text (and refusal) parts as Gemini text parts; any other part is malformed here."""
    if content is None or isinstance(content, str):
        return [{"text": content}] if content else []
    if not isinstance(content, list):
        raise bad_request(f"{where}: must be a string or a list of content parts.")
    parts = []
    for k, part in enumerate(content):
        kind = as_object(part).get("type")
        text = part.get("text") if kind == "text" else part.get("refusal") if kind == "refusal" else None
        if not isinstance(text, str):
            raise bad_request(f"{where}.{k}: only text parts are allowed here.")
        if text:
            parts.append({"text": text})
    return parts


def user_parts(content: Any, where: str, lost: list[str]) -> list[dict]:
    """A user message's content: text, images, files and audio."""
    if content is None or isinstance(content, str):
        return text_parts(content, f"{where}.content")
    if not isinstance(content, list):
        raise bad_request(f"{where}.content: must be a string or a list of content parts.")
    parts: list[dict] = []
    for k, part in enumerate(content):
        kind, at = as_object(part).get("type"), f"{where}.content.{k}"
        if kind == "text" and isinstance(part.get("text"), str):
            if part["text"]:
                parts.append({"text": part["text"]})
        elif kind == "image_url":
            image = part.get("image_url")
            parts.append(_media(image.get("url") if isinstance(image, dict) else image, f"{at}.image_url.url"))
        elif kind == "file":
            if (found := _file(as_object(part.get("file")), at)) is not None:
                parts.append(found)
            else:
                lost.append(f"{at} (file)")  # an uploaded file's id: Gemini has no way to read it
        elif kind == "input_audio":
            parts.append(_audio(as_object(part.get("input_audio")), at))
        elif isinstance(kind, str) and kind != "text":
            lost.append(f"{at} ({kind})")  # a later part type
        else:
            raise bad_request(f"{at}.type: content parts of type {kind!r} cannot be sent to this model.")
    return parts


def _media(url: Any, where: str) -> dict:
    """An image_url (or a file's data) as inlineData, or fileData for a URL Gemini fetches."""
    if isinstance(url, str) and url.startswith("data:"):
        media, data = data_url(url)
        if data is not None and media:
            return {"inlineData": {"mimeType": "image/jpeg" if media == "image/jpg" else media, "data": data}}
    elif isinstance(url, str) and url.startswith(_URL_SCHEMES):
        media = url_media_type(url)
        if media is None:
            raise bad_request(f"{where}: the media type of {url!r} cannot be told from its extension, "
                              "which Gemini needs for a URL; send the data inline (a base64 data URL).")
        return {"fileData": {"mimeType": media, "fileUri": url}}
    raise bad_request(f"{where}: must be an http(s) or gs:// URL or a base64 data URL.")


def _file(file: dict, at: str) -> dict | None:
    """An inline file (a base64 data URL: a PDF, an image, text) as inlineData; None for an uploaded
    file, which is known to the client's server only by its id."""
    data = file.get("file_data")
    if isinstance(data, str) and data:
        return _media(data, f"{at}.file.file_data")
    if file.get("file_id") is None:
        raise bad_request(f"{at}.file: file_data or file_id is required.")
    return None


def _audio(audio: dict, at: str) -> dict:
    data, audio_format = audio.get("data"), audio.get("format")
    if not isinstance(data, str) or not data:
        raise bad_request(f"{at}.input_audio.data: must be base64 audio.")
    if not isinstance(audio_format, str) or not _AUDIO_FORMAT.fullmatch(audio_format):
        raise bad_request(f"{at}.input_audio.format: must name the audio's format, such as 'wav' or 'mp3'.")
    return {"inlineData": {"mimeType": f"audio/{audio_format}", "data": data}}


def url_media_type(url: str) -> str | None:
    """The media type of a URL by its path's extension, None when it has no known one."""
    name = urlsplit(url).path.rsplit("/", 1)[-1]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return EXTENSION_TYPES.get(extension)


def data_url(url: Any) -> tuple[str, str | None]:
    """(media type, base64 data) of a base64 data URL; data None for anything else."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return "", None
    head, comma, data = url[5:].partition(",")
    if not comma or not head.endswith(";base64") or not data:
        return "", None
    return head.split(";", 1)[0].lower(), data


def call_arguments(arguments: Any, where: str) -> dict:
    """A tool call's arguments (a JSON object, as a string) as functionCall.args. Gemini takes an
    object: anything else is refused, naming the field, rather than sent as a call with no arguments."""
    if isinstance(arguments, dict):
        return arguments
    if arguments is None or arguments == "":
        return {}
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise bad_request(f"{where}: must be a JSON object (as a string) for this model.")
    return value
