"""For the reference upstream tests: the SDK clients pointed straight at it, and streamed requests read
line by line with plain httpx."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai

USER = [{"role": "user", "content": "hello there world"}]


def oa(upstream, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=upstream.url + "/v1", api_key=kw.pop("api_key", "x"), max_retries=0, **kw)


def an(upstream, **kw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=upstream.url, api_key=kw.pop("api_key", "x"), max_retries=0, **kw)


def sse_lines(upstream, path: str, body: dict, **kw) -> tuple[list[str], Exception | None]:
    """POST a streamed request with plain httpx; the non-empty lines received, and the error that ended it."""
    lines: list[str] = []
    try:
        with httpx.stream("POST", upstream.url + path, json=body, timeout=kw.pop("timeout", 5), **kw) as resp:
            assert resp.status_code == 200
            for line in resp.iter_lines():
                if line:
                    lines.append(line)
    except httpx.HTTPError as exc:
        return lines, exc
    return lines, None


def chunks_of(lines: list[str]) -> list[dict]:
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
