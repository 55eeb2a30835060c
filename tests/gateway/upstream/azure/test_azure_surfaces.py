"""An Azure OpenAI deployment behind every /v1 surface, driven with the official SDKs through the running
gateway: replies whole and streamed parse, each call is metered once, Azure's 429 falls through to the
next model (and alone is a 503 that says Azure's wait), a reply cut midway comes back in part, and Azure's
content filter reaches the client in each surface's own shape: a refused prompt as the surface's 400
with Azure's words, a stopped reply as the surface's own way of saying it (docs/compatibility.md)."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from gateway.models import UsageRecord
from tests.factories import ModelFallbackFactory
from tests.gateway.upstream.azure.fake_azure import FILTER_MESSAGE, FILTERED_PROMPT, FILTERED_REPLY
from tests.servers import wait_for_quiet_database, wait_for_usage

AZ = "az/gpt-4o-deployment"
HELLO = [{"role": "user", "content": "hello azure"}]


def metered(cloud, count: int) -> list[tuple[str, str, int, int]]:
    """(surface, model, input, output) of the account's usage records, once `count` are written and the
    gateway has gone quiet: exactly `count`, none written twice."""
    wait_for_usage(cloud.account, count)
    wait_for_quiet_database()
    records = UsageRecord.objects.filter(account=cloud.account).order_by("id")
    return [(r.surface, r.model, r.input_tokens, r.output_tokens) for r in records]


def test_chat_completions_whole_and_streamed(cloud):
    whole = cloud.openai.chat.completions.create(model=AZ, messages=HELLO)
    assert (whole.model, whole.choices[0].message.content, whole.choices[0].finish_reason) == (
        AZ, "Echo: hello azure", "stop")
    assert (whole.usage.prompt_tokens, whole.usage.completion_tokens) == (2, 3)
    chunks = list(cloud.openai.chat.completions.create(model=AZ, messages=HELLO, stream=True,
                                                       stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: hello azure"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.total_tokens == 5
    assert metered(cloud, 2) == [("chat.completions", AZ, 2, 3)] * 2
    sent = cloud.azure.fake.requests[-1]
    assert (sent.path, sent.query) == ("/openai/deployments/gpt-4o-deployment/chat/completions",
                                       "api-version=2024-10-21")


def test_messages_whole_and_streamed(cloud):
    whole = cloud.anthropic.messages.create(model=AZ, max_tokens=50, messages=HELLO)
    assert (whole.model, whole.content[0].text, whole.stop_reason) == (AZ, "Echo: hello azure", "end_turn")
    assert (whole.usage.input_tokens, whole.usage.output_tokens) == (2, 3)
    with cloud.anthropic.messages.stream(model=AZ, max_tokens=50, messages=HELLO) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert (text, final.stop_reason, final.usage.output_tokens) == ("Echo: hello azure", "end_turn", 3)
    assert metered(cloud, 2) == [("messages", AZ, 2, 3)] * 2


def test_responses_whole_and_streamed(cloud):
    whole = cloud.openai.responses.create(model=AZ, input="hello azure")
    assert (whole.model, whole.output_text, whole.status) == (AZ, "Echo: hello azure", "completed")
    with cloud.openai.responses.create(model=AZ, input="hello azure", stream=True) as stream:
        events = list(stream)
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "Echo: hello azure"
    assert metered(cloud, 2) == [("responses", AZ, 2, 3)] * 2


def test_embeddings(cloud):
    reply = cloud.openai.embeddings.create(model="az/embed-deployment", input=["hello azure", "again"])
    assert reply.model == "az/embed-deployment" and len(reply.data) == 2 and len(reply.data[0].embedding) == 64
    assert reply.usage.prompt_tokens == 3
    assert metered(cloud, 1) == [("embeddings", "az/embed-deployment", 3, 0)]
    sent = cloud.azure.fake.requests[-1]
    assert (sent.path, sent.json) == ("/openai/deployments/embed-deployment/embeddings",
                                      {"model": "embed-deployment", "input": ["hello azure", "again"]})


def test_a_429_falls_through_to_the_next_model_on_every_surface(cloud):
    ModelFallbackFactory(model=cloud.chat, fallback=cloud.echo)
    ModelFallbackFactory(model=cloud.embed, fallback=cloud.embed_1)
    cloud.azure.fake.throttle(5)
    assert cloud.openai.chat.completions.create(model=AZ, messages=HELLO).model == "oa/echo-1"
    assert cloud.anthropic.messages.create(model=AZ, max_tokens=50, messages=HELLO).model == "oa/echo-1"
    assert cloud.openai.responses.create(model=AZ, input="hello azure").model == "oa/echo-1"
    assert cloud.openai.embeddings.create(model="az/embed-deployment", input=["x"]).model == "oa/embed-1"
    events = cloud.api.post("/api/v1/chat", json={"message": "hello azure", "model": AZ}).text
    assert '"model":"oa/echo-1"' in events.split("\n\n")[0]
    assert [r.path.rsplit("/", 1)[-1] for r in cloud.azure.fake.requests] == ["completions"] * 3 + [
        "embeddings", "completions"]
    assert [m for _, m, _, _ in metered(cloud, 5)] == ["oa/echo-1"] * 3 + ["oa/embed-1", "oa/echo-1"]


def test_a_429_with_no_other_model_is_a_503_that_says_azures_wait(cloud):
    cloud.azure.fake.throttle(1)
    with pytest.raises(openai.APIStatusError) as failed:
        cloud.openai.chat.completions.create(model=AZ, messages=HELLO)
    assert failed.value.status_code == 503
    assert failed.value.response.headers["retry-after"] == "7"
    assert failed.value.body == {"message": "Every model in the chain is unavailable right now; retry in 7 seconds.",
                                 "type": "server_error", "param": None, "code": "service_unavailable"}


def post(cloud, path: str, body: dict) -> httpx.Response:
    return cloud.api.post(path, json=body)


@pytest.mark.parametrize(("path", "body", "text_of"), [
    ("/v1/chat/completions", {"model": AZ, "messages": HELLO}, lambda p: p["choices"][0]["message"]["content"]),
    ("/v1/messages", {"model": AZ, "max_tokens": 50, "messages": HELLO}, lambda p: p["content"][0]["text"]),
    ("/v1/responses", {"model": AZ, "input": "hello azure"}, lambda p: p["output"][0]["content"][0]["text"]),
])
def test_a_reply_cut_midway_comes_back_in_part(cloud, path, body, text_of):
    cloud.azure.upstream.configure(cut_after_tokens=2)
    r = post(cloud, path, body)
    assert r.status_code == 502
    assert text_of(r.json()["partial"]) == "Echo: hello "


def test_a_stream_cut_midway_ends_in_each_surfaces_failure_signal(cloud):
    cloud.azure.upstream.configure(cut_after_tokens=2)
    received = []
    with pytest.raises(openai.APIError) as failed:
        for chunk in cloud.openai.chat.completions.create(model=AZ, messages=HELLO, stream=True):
            received.append(chunk.choices[0].delta.content or "")
    assert ("".join(received), failed.value.body["code"]) == ("Echo: hello ", "disconnected")
    with pytest.raises(anthropic.APIStatusError) as failed:
        with cloud.anthropic.messages.stream(model=AZ, max_tokens=50, messages=HELLO) as stream:
            list(stream.text_stream)
    assert failed.value.body["error"]["type"] == "api_error"
    with cloud.openai.responses.create(model=AZ, input="hello azure", stream=True) as stream:
        events = list(stream)
    assert (events[-1].type, events[-1].response.status) == ("response.failed", "failed")
    assert "disconnected" in events[-1].response.error.message


def test_a_prompt_the_content_filter_refuses_is_the_surfaces_400_with_azures_words(cloud):
    refused = [{"role": "user", "content": FILTERED_PROMPT}]
    with pytest.raises(openai.BadRequestError) as failed:
        cloud.openai.chat.completions.create(model=AZ, messages=refused)
    assert failed.value.body == {"message": FILTER_MESSAGE, "type": "invalid_request_error", "param": None,
                                 "code": "upstream_refused"}
    with pytest.raises(openai.BadRequestError) as failed:
        cloud.openai.responses.create(model=AZ, input=FILTERED_PROMPT)
    assert failed.value.body["message"] == FILTER_MESSAGE
    with pytest.raises(anthropic.BadRequestError) as failed:
        cloud.anthropic.messages.create(model=AZ, max_tokens=50, messages=refused)
    assert failed.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                            "message": FILTER_MESSAGE},
                                 "request_id": failed.value.response.headers["x-request-id"]}
    streamed = post(cloud, "/v1/chat/completions", {"model": AZ, "messages": refused, "stream": True})
    assert streamed.status_code == 400 and streamed.json()["error"]["message"] == FILTER_MESSAGE
    assert UsageRecord.objects.filter(account=cloud.account).count() == 0


def test_a_reply_the_content_filter_stops_says_so_in_each_surfaces_words(cloud):
    story = [{"role": "user", "content": FILTERED_REPLY}]
    whole = cloud.openai.chat.completions.create(model=AZ, messages=story)
    assert (whole.choices[0].message.content, whole.choices[0].finish_reason) == ("Once upon a time",
                                                                                  "content_filter")
    chunks = [c for c in cloud.openai.chat.completions.create(model=AZ, messages=story, stream=True) if c.choices]
    assert chunks[-1].choices[0].finish_reason == "content_filter"
    assert chunks[-1].choices[0].model_extra["content_filter_results"]["hate"] == {"filtered": True,
                                                                                   "severity": "high"}
    message = cloud.anthropic.messages.create(model=AZ, max_tokens=50, messages=story)
    assert (message.content[0].text, message.stop_reason) == ("Once upon a time", "refusal")
    response = cloud.openai.responses.create(model=AZ, input=FILTERED_REPLY)
    assert (response.status, response.incomplete_details.reason, response.output_text) == (
        "incomplete", "content_filter", "Once upon a time")
    assert [(s, i, o) for s, _, i, o in metered(cloud, 4)] == [
        ("chat.completions", 5, 4), ("chat.completions", 5, 4), ("messages", 5, 4), ("responses", 5, 4)]
