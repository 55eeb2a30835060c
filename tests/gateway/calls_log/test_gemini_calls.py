"""The calls log on Google's Gemini API surface (compat/gemini.py): a call is one row of surface
`gemini`, on /v1beta and on /v1, whole or streamed; counting tokens and reading the model list are
not calls."""

import httpx

from gateway.models import CallRecord
from tests.gateway.calls_log.conftest import call_of, facts, rid, usage_of
from tests.gateway.calls_log.test_v1_chat_calls import answered

BODY = {"contents": [{"role": "user", "parts": [{"text": "one two three four five"}]}]}


def post(world, path: str, request_id: str) -> httpx.Response:
    return httpx.post(f"{world.base}{path}", json=BODY, timeout=30,
                      headers={"x-goog-api-key": world.key, **rid(request_id)})


def test_a_gemini_call_is_one_row_of_its_surface_on_either_version(world):
    assert post(world, "/v1beta/models/oa/echo-1:generateContent", "gem-whole").status_code == 200
    assert post(world, "/v1/models/an/claude-echo:streamGenerateContent?alt=sse", "gem-stream").status_code == 200
    assert facts(call_of("gem-whole")) == answered(world, "gemini", "oa/echo-1", usage_of("gem-whole"))
    assert facts(call_of("gem-stream")) == answered(world, "gemini", "an/claude-echo", usage_of("gem-stream"))


def test_counting_tokens_and_listing_models_are_not_calls(world):
    assert post(world, "/v1beta/models/oa/echo-1:countTokens", "gem-count").status_code == 200
    listed = httpx.get(f"{world.base}/v1beta/models", headers={"x-goog-api-key": world.key, **rid("gem-list")})
    assert listed.status_code == 200
    post(world, "/v1beta/models/oa/echo-1:generateContent", "gem-after")
    call_of("gem-after")  # written after the two others, by the same drainer
    assert not CallRecord.objects.filter(request_id__in=["gem-count", "gem-list"]).exists()
