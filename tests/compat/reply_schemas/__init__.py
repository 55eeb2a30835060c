"""The providers' published reply shapes (`openai.json`, `anthropic.json` beside this file, each
naming its source at its top), and the checks of what the gateway answers against them.

`check(provider, name, body)` validates one body against the schema `name` of that provider's
document; `check_events(provider, events)` validates each event of a stream against the schema of
its own type (so a failure names the field, not only "matches none of the union"), then against
the document's union of stream events."""

from __future__ import annotations

import functools
import json
import pathlib
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

HERE = pathlib.Path(__file__).parent

# A stream event's `type` → the schema of that event, per provider.
EVENT_SCHEMAS = {
    "anthropic": {
        "message_start": "RawMessageStartEvent", "message_delta": "RawMessageDeltaEvent",
        "message_stop": "RawMessageStopEvent", "content_block_start": "RawContentBlockStartEvent",
        "content_block_delta": "RawContentBlockDeltaEvent", "content_block_stop": "RawContentBlockStopEvent",
        "ping": "PingEvent", "error": "ErrorResponse",
    },
    "openai": {
        "response.created": "ResponseCreatedEvent", "response.in_progress": "ResponseInProgressEvent",
        "response.completed": "ResponseCompletedEvent", "response.incomplete": "ResponseIncompleteEvent",
        "response.failed": "ResponseFailedEvent", "response.output_item.added": "ResponseOutputItemAddedEvent",
        "response.output_item.done": "ResponseOutputItemDoneEvent",
        "response.content_part.added": "ResponseContentPartAddedEvent",
        "response.content_part.done": "ResponseContentPartDoneEvent",
        "response.output_text.delta": "ResponseTextDeltaEvent", "response.output_text.done": "ResponseTextDoneEvent",
        "response.function_call_arguments.delta": "ResponseFunctionCallArgumentsDeltaEvent",
        "response.function_call_arguments.done": "ResponseFunctionCallArgumentsDoneEvent",
        "error": "ResponseErrorEvent",
    },
}
STREAM_UNION = {"anthropic": "StreamEvent", "openai": "ResponseStreamEvent"}


@functools.cache
def document(provider: str) -> dict[str, Any]:
    return json.loads((HERE / f"{provider}.json").read_text())


@functools.cache
def validator(provider: str, name: str) -> Draft202012Validator:
    defs = document(provider)["$defs"]
    assert name in defs, f"{provider}.json has no schema {name!r}"
    schema = {"$defs": defs, "$ref": f"#/$defs/{name}"}
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def problems(provider: str, name: str, body: Any) -> list[str]:
    """Each way `body` breaks the schema, as `path: message` (the deepest cause of a union's failure)."""
    found = []
    for error in validator(provider, name).iter_errors(body):
        cause = best_match([error]) if error.context else error
        where = ".".join(str(part) for part in cause.absolute_path) or "(top)"
        found.append(f"{where}: {cause.message}")
    return sorted(found)


def check(provider: str, name: str, body: Any) -> None:
    found = problems(provider, name, body)
    assert not found, f"{provider} {name} does not hold:\n  " + "\n  ".join(found) + f"\nbody: {json.dumps(body)}"


def check_events(provider: str, events: list[dict[str, Any]]) -> None:
    assert events, "the stream had no events"
    for event in events:
        kind = event.get("type") if isinstance(event, dict) else None
        assert kind in EVENT_SCHEMAS[provider], f"an event of a type the {provider} document has no place for: {event}"
        check(provider, EVENT_SCHEMAS[provider][kind], event)
        check(provider, STREAM_UNION[provider], event)


def sse(text: str) -> list[tuple[str | None, str]]:
    """A Server-Sent Events body as (event name or None, data) pairs, one per event."""
    out = []
    for frame in text.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in frame.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            out.append((name, "\n".join(data)))
    return out


def sse_json(text: str) -> list[dict[str, Any]]:
    """The JSON data of each event of a named-event stream (Messages, Responses); an event's name
    must be its data's `type`, as both providers send them."""
    events = []
    for name, data in sse(text):
        event = json.loads(data)
        assert name == event.get("type"), f"event {name!r} carries data of type {event.get('type')!r}"
        events.append(event)
    return events
