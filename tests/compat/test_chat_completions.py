"""POST /v1/chat/completions driven by the official openai SDK through a running gateway, in
front of an OpenAI-kind and an Anthropic-kind server (the reference upstream speaks both)."""

import pytest

MODELS = ["oa/echo-1", "an/claude-echo"]


@pytest.mark.parametrize("model", MODELS)
def test_it_answers_a_chat_completion(world, model):
    completion = world.openai.chat.completions.create(
        model=model, messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]
    )
    assert completion.choices[0].message.content == "Echo: hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == model
    assert completion.usage.completion_tokens == 3
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + 3


@pytest.mark.parametrize("model", MODELS)
def test_it_streams_a_chat_completion_with_usage(world, model):
    stream = world.openai.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "one two three"}], stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: one two three"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 4
    assert {c.model for c in chunks} == {model}


def test_the_system_prompt_reaches_an_anthropic_server_as_system(world):
    world.openai.chat.completions.create(
        model="an/claude-echo", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    )
    sent = world.upstream.last.json
    assert sent["system"] == "Be brief."
    assert sent["messages"] == [{"role": "user", "content": "hi"}] or sent["messages"][0]["role"] == "user"
    assert sent["model"] == "claude-echo"


@pytest.mark.parametrize("model", MODELS)
def test_tool_calls_come_back_in_the_chat_shape(world, model):
    world.upstream.configure(tool_arguments={"city": "Lisbon"})
    tools = [{"type": "function", "function": {"name": "weather", "description": "Weather in a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    completion = world.openai.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "weather?"}], tools=tools
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "weather"
    assert call.function.arguments.replace(" ", "") == '{"city":"Lisbon"}'
    follow_up = world.openai.chat.completions.create(
        model=model, tools=tools,
        messages=[{"role": "user", "content": "weather?"},
                  {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                  {"role": "tool", "tool_call_id": call.id, "content": "sunny"}],
    )
    assert follow_up.choices[0].message.content == "Tool said: sunny"


def test_the_reply_carries_an_inference_request_id(world):
    raw = world.openai.chat.completions.with_raw_response.create(
        model="oa/echo-1", messages=[{"role": "user", "content": "x"}]
    )
    assert raw.headers["x-inference-request-id"]
    assert raw.headers["x-request-id"]
    assert raw.headers["x-ratelimit-limit"] == "20"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [False, True])
def test_calls_reuse_the_connection_to_the_model_server(world, model, stream):
    """The reply is read to the end of its body, so the pooled connection is kept: no new
    TCP (and, for a cloud provider, TLS) handshake per call. The upstream ends each body a moment
    after its last event, as a server on a real network does."""
    world.upstream.configure(end_delay_ms=20)
    for _ in range(3):
        result = world.openai.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}],
                                                      stream=stream)
        if stream:
            list(result)
    ports = {r.client for r in world.upstream.requests}
    assert len(world.upstream.requests) == 3
    assert len(ports) == 1
