"""A Bedrock model that is not Claude: the chat form goes to `/model/{id}/converse-stream` as Converse's request
(gateway/formats/converse/, whose own tests hold it to boto3's service model), signed; ConverseStream's frames come
back as chat chunks. Through the running gateway the official SDKs read it on `/v1/chat/completions` and on
`/v1/messages` (through the chat form), its usage is metered once, a throttled model falls through; Titan's and
Cohere's embeddings answer `/v1/embeddings` in OpenAI's shape with their token counts."""

from __future__ import annotations

from types import SimpleNamespace

import anthropic
import openai
import pytest

from gateway.formats.converse.from_chat import chat_to_converse_request
from gateway.models import UsageRecord
from gateway.upstream.providers import bedrock
from gateway.upstream.providers.base import StreamCut, UpstreamError
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, REGION, SECRET_KEY, embedding
from tests.gateway.upstream.bedrock.support import collect, fake_bedrock, target  # noqa: F401 — a fixture
from tests.servers import wait_for_quiet_database, wait_for_usage

NOVA = "amazon.nova-lite-v1:0"
TITAN = "amazon.titan-embed-text-v2:0"
COHERE = "cohere.embed-english-v3"
CHAT = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello nova"}],
        "temperature": 0.5, "max_tokens": 40, "stop": ["END"]}


def text_of(chunks: list[dict]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))


def test_the_chat_form_goes_to_converse_stream_signed_as_converse_and_comes_back_as_chat_chunks(fake_bedrock):  # noqa: F811
    chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), CHAT))
    assert failure is None
    assert text_of(chunks) == "Echo: hello nova"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")][-1] == "stop"
    assert chunks[-1]["usage"]["prompt_tokens"] == 4
    sent = fake_bedrock.requests[-1]
    assert sent.raw_path == "/model/amazon.nova-lite-v1%3A0/converse-stream"
    assert sent.json == chat_to_converse_request(CHAT, model_id=NOVA)
    assert sent.json["system"] == [{"text": "Be brief."}]
    assert sent.json["inferenceConfig"] == {"maxTokens": 40, "temperature": 0.5, "stopSequences": ["END"]}
    assert (sent.auth, sent.problem) == ("sigv4", None)


def test_a_tool_use_and_a_max_tokens_stop_come_back_as_chat_chunks(fake_bedrock):  # noqa: F811
    fake_bedrock.configure(tool_arguments={"city": "Paris"})
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), {**CHAT, "tools": tools}))
    assert failure is None
    calls = [call for c in chunks if c.get("choices") for call in c["choices"][0]["delta"].get("tool_calls") or []]
    assert calls[0]["function"]["name"] == "get_weather" and calls[0]["id"].startswith("tooluse_")
    assert "".join(call["function"]["arguments"] for call in calls) == '{"city":"Paris"}'
    assert [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")][-1] == "tool_calls"
    chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), {**CHAT, "max_tokens": 2}))
    assert failure is None and text_of(chunks) == "Echo: hello "
    assert [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")][-1] == "length"


def test_a_field_converse_cannot_carry_is_refused_by_name_before_any_request(fake_bedrock):  # noqa: F811
    chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), {**CHAT, "logit_bias": {"1": 2}}))
    assert chunks == [] and not fake_bedrock.requests
    assert isinstance(failure, UpstreamError) and (failure.kind, failure.status) == ("refused", 400)
    assert "'logit_bias'" in failure.message


def test_converse_failures_are_bedrock_s_before_and_after_the_first_chunk(fake_bedrock):  # noqa: F811
    fake_bedrock.configure(fail_error="ThrottlingException", fail_status=429, fail_times=1)
    _chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), CHAT))
    assert isinstance(failure, UpstreamError) and (failure.kind, failure.status) == ("unavailable", 429)
    assert failure.message.startswith("ThrottlingException: ")
    fake_bedrock.configure(exception_after_tokens=1)
    chunks, failure = collect(lambda: bedrock.chat_stream(target(fake_bedrock, NOVA), CHAT))
    assert isinstance(failure, StreamCut) and failure.reason == "upstream_error"
    assert text_of(chunks) == "Echo: "


@pytest.fixture
def world(transactional_db, live_gateway, fake_bedrock):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    key = api_key_for(account)
    aws = ModelServerFactory(name="aws", kind="bedrock", base_url=fake_bedrock.url, region=REGION, is_remote=True,
                             aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, read_timeout=5.0)
    ModelFactory(server=aws, name=NOVA, is_default=True)
    for name in (TITAN, COHERE):
        ModelFactory(server=aws, name=name, supports_chat=False, supports_embeddings=True)
    yield SimpleNamespace(
        bedrock=fake_bedrock, account=account,
        openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
        anthropic=anthropic.Anthropic(base_url=live_gateway, api_key=key, max_retries=0),
    )
    wait_for_quiet_database()


def test_a_nova_model_answers_chat_completions_whole_and_streamed_and_messages_in_the_sdks(world):
    whole = world.openai.chat.completions.create(model=f"aws/{NOVA}", messages=CHAT["messages"], max_tokens=40)
    assert whole.choices[0].message.content == "Echo: hello nova"
    assert (whole.choices[0].finish_reason, whole.model) == ("stop", f"aws/{NOVA}")
    stream = world.openai.chat.completions.create(model=f"aws/{NOVA}", messages=CHAT["messages"], stream=True,
                                                  stream_options={"include_usage": True})
    pieces = list(stream)
    assert "".join(p.choices[0].delta.content or "" for p in pieces if p.choices) == "Echo: hello nova"
    assert pieces[-1].usage.prompt_tokens == 4
    message = world.anthropic.messages.create(model=f"aws/{NOVA}", max_tokens=40, system="Be brief.",
                                              messages=[{"role": "user", "content": "hello nova"}])
    assert (message.content[0].text, message.stop_reason) == ("Echo: hello nova", "end_turn")
    records = wait_for_usage(world.account, 3)
    assert [(r.model, r.input_tokens) for r in records] == [(f"aws/{NOVA}", 4)] * 3


@pytest.mark.parametrize("model", [TITAN, COHERE])
def test_titan_and_cohere_embeddings_answer_in_openais_shape_with_their_token_counts(world, model):
    texts = ["alpha beta", "gamma delta epsilon", "zeta"]
    reply = world.openai.embeddings.create(model=f"aws/{model}", input=texts)
    assert [item.embedding for item in reply.data] == [embedding(text) for text in texts]
    assert [item.index for item in reply.data] == [0, 1, 2]
    assert reply.usage.prompt_tokens == 6  # one per word, as the fake counts them
    calls = world.bedrock.calls()
    if model == TITAN:  # one text a call
        assert sorted(call.json["inputText"] for call in calls) == sorted(texts)
    else:
        [call] = calls
        assert call.json == {"texts": texts, "input_type": "search_document"}
    assert all(call.raw_path.endswith("/invoke") and call.problem is None for call in calls)
    [record] = wait_for_usage(world.account, 1)
    assert (record.model, record.input_tokens, record.surface) == (f"aws/{model}", 6, "embeddings")
    assert UsageRecord.objects.count() == 1


def test_a_chat_model_asked_for_embeddings_is_refused_by_name(world):
    with pytest.raises(openai.BadRequestError) as caught:
        world.openai.embeddings.create(model=f"aws/{NOVA}", input=["x"])
    assert caught.value.status_code == 400
