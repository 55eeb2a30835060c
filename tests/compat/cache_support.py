"""For the response cache tests: turning the cache on for a group, counting what reached
the reference upstream, and calling each /v1 surface through its official SDK with the headers of
the answer kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

ASK = [{"role": "user", "content": "one two three four five six"}]
TEXT = "Echo: one two three four five six"  # what the reference upstream answers to ASK


def caching(group, seconds: int = 60) -> None:
    """The group's replies kept `seconds` (0: the cache off). Saved, so every process sees it."""
    group.response_cache_ttl = seconds
    group.save()


def model_calls(world) -> int:
    """Chat calls that reached the reference upstream (any wire format)."""
    return sum(1 for r in world.upstream.requests if r.method == "POST" and r.path in ("/v1/chat/completions",
                                                                                          "/v1/messages"))


@dataclass
class Answer:
    headers: Any
    body: dict  # the whole reply, or the reply gathered from the stream's events
    text: str
    events: list  # the stream's chunks or events as the SDK parsed them (empty for a whole reply)

    @property
    def cache(self) -> str | None:
        return self.headers.get("X-Cache")


def chat(world, *, stream: bool = False, headers: dict | None = None, client=None, **fields) -> Answer:
    """POST /v1/chat/completions through the openai SDK."""
    client = client or world.openai
    request = {"model": "oa/echo-1", "messages": ASK, **fields}
    if not stream:
        raw = client.chat.completions.with_raw_response.create(**request, extra_headers=headers or {})
        completion = raw.parse()
        return Answer(raw.headers, completion.model_dump(), completion.choices[0].message.content, [])
    with client.chat.completions.with_streaming_response.create(**request, stream=True,
                                                                 extra_headers=headers or {}) as response:
        chunks = [chunk.model_dump() for chunk in response.parse()]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    return Answer(response.headers, {}, text, chunks)


def messages(world, *, model: str = "an/claude-echo", stream: bool = False, headers: dict | None = None,
             **fields) -> Answer:
    """POST /v1/messages through the anthropic SDK."""
    request = {"model": model, "max_tokens": 64, "messages": ASK, **fields}
    if not stream:
        raw = world.anthropic.messages.with_raw_response.create(**request, extra_headers=headers or {})
        message = raw.parse()
        return Answer(raw.headers, message.model_dump(), message.content[0].text, [])
    with world.anthropic.messages.with_streaming_response.create(**request, stream=True,
                                                                  extra_headers=headers or {}) as response:
        events = [event.model_dump() for event in response.parse()]
    text = "".join(e["delta"].get("text") or "" for e in events if e["type"] == "content_block_delta")
    return Answer(response.headers, {}, text, events)


def responses(world, *, stream: bool = False, headers: dict | None = None, **fields) -> Answer:
    """POST /v1/responses through the openai SDK."""
    request = {"model": "oa/echo-1", "input": ASK[0]["content"], **fields}
    if not stream:
        raw = world.openai.responses.with_raw_response.create(**request, extra_headers=headers or {})
        response = raw.parse()
        return Answer(raw.headers, response.model_dump(), response.output_text, [])
    with world.openai.responses.with_streaming_response.create(**request, stream=True,
                                                               extra_headers=headers or {}) as response:
        events = [event.model_dump() for event in response.parse()]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    done = next(e for e in events if e["type"] == "response.completed")
    return Answer(response.headers, done["response"], text, events)


def without_ids(reply: dict, *names: str) -> dict:
    """`reply` without what differs from answer to answer (its id, its time)."""
    return {k: v for k, v in reply.items() if k not in {"id", "created", "created_at", *names}}


def scrape(base: str, httpx_get) -> dict[tuple[str, tuple], float]:
    """The gateway's /metrics, as {(sample name, labels): value}."""
    r = httpx_get(f"{base}/metrics")
    assert r.status_code == 200, r.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}
