"""Same format, same request: `/v1/messages` to an Anthropic server and
`/v1/chat/completions` to an OpenAI-compatible one reach the server as the client sent them,
headers and query included, with only `model` replaced (and `stream`, which the gateway sets so a
reply cut midway can still be returned in part); the reply comes back as the server sent it."""

import httpx
import pytest

from tests.servers import wait_for_usage

CLAUDE_CODE_BETAS = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"
SYSTEM = [
    {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "Work in /tmp.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
]
ANTHROPIC_BODY = {
    "max_tokens": 64,
    "system": SYSTEM,
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "run it", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should run it.", "signature": "sig-1"},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "false"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                                      "cache_control": {"type": "ephemeral"},
                                      "content": [{"type": "text", "text": "exit 1"},
                                                  {"type": "text", "text": "no such file"}]}]},
    ],
    "tools": [{"name": "Bash", "description": "Run a command",
               "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
    "tool_choice": {"type": "auto"},
    "top_k": 40,
    "temperature": 1,
    "metadata": {"user_id": "user_abc_account_def_session_ghi"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "medium"},
    "a_field_of_a_later_api_version": {"anything": [1, 2, 3]},
}


def post_messages(world, body, *, query="", headers=None, **kwargs):
    return httpx.post(f"{world.base}/v1/messages{query}", json=body, timeout=30,
                      headers={"x-api-key": world.key, **(headers or {})}, **kwargs)


def last_request(world, path):
    return [r for r in world.upstream.requests if r.path == path][-1]


@pytest.mark.parametrize("stream", [False, True])
def test_a_messages_request_reaches_an_anthropic_server_as_it_was_sent(world, stream):
    body = {"model": "an/claude-echo", **ANTHROPIC_BODY, "stream": stream}
    r = post_messages(world, body, query="?beta=true",
                      headers={"anthropic-beta": CLAUDE_CODE_BETAS, "anthropic-version": "2023-06-01"})
    assert r.status_code == 200, r.text
    sent = last_request(world, "/v1/messages")
    assert sent.json == {**body, "model": "claude-echo", "stream": True}
    assert sent.query == "beta=true"
    assert sent.headers["anthropic-beta"] == CLAUDE_CODE_BETAS
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers.get("x-api-key") != world.key  # the client's credential is the gateway's, never sent on


def test_without_a_version_header_the_server_gets_the_default_one(world):
    assert post_messages(world, {"model": "an/claude-echo", **ANTHROPIC_BODY}).status_code == 200
    sent = last_request(world, "/v1/messages")
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "anthropic-beta" not in sent.headers


def test_a_whole_reply_comes_back_as_the_server_sent_it_with_the_gateways_id_and_model(world):
    r = post_messages(world, {"model": "an/claude-echo", "max_tokens": 50,
                              "messages": [{"role": "user", "content": "one two"}]})
    message = r.json()
    assert message["id"].startswith("msg_") and message["id"][4:] == r.headers["X-Inference-Request-Id"]
    assert message["model"] == "an/claude-echo"
    assert message["content"] == [{"type": "text", "text": "Echo: one two", "citations": None}]
    assert (message["stop_reason"], message["stop_sequence"]) == ("end_turn", None)
    # the server's own usage, cache counts included, as it sent them
    assert message["usage"]["cache_creation_input_tokens"] == 0 and message["usage"]["cache_read_input_tokens"] == 0
    record = wait_for_usage(world.account)[0]
    assert (record.input_tokens, record.output_tokens) == (message["usage"]["input_tokens"], 3)
    assert record.surface == "messages"


def test_a_streamed_reply_passes_the_servers_events_on(world):
    r = post_messages(world, {"model": "an/claude-echo", "max_tokens": 50, "stream": True,
                              "messages": [{"role": "user", "content": "one two"}]})
    names = [line[len("event: "):] for line in r.text.splitlines() if line.startswith("event: ")]
    # the reference server's own order, ping included (a translated stream has no ping)
    assert names == ["message_start", "content_block_start", "ping"] + ["content_block_delta"] * 3 + [
        "content_block_stop", "message_delta", "message_stop"]
    assert f'"id":"msg_{r.headers["X-Inference-Request-Id"]}"' in r.text
    assert '"model":"an/claude-echo"' in r.text and '"model":"claude-echo"' not in r.text


def test_the_anthropic_sdk_reads_a_passed_through_tool_round_trip(world):
    world.upstream.configure(tool_arguments={"command": "ls"})
    tools = ANTHROPIC_BODY["tools"]
    first = world.anthropic.messages.create(model="an/claude-echo", max_tokens=100, tools=tools,
                                            messages=[{"role": "user", "content": "list"}])
    use = first.content[0]
    assert (first.stop_reason, use.type, use.name, use.input) == ("tool_use", "tool_use", "Bash", {"command": "ls"})
    with world.anthropic.messages.stream(
            model="an/claude-echo", max_tokens=100, tools=tools,
            messages=[{"role": "user", "content": "list"},
                      {"role": "assistant", "content": [use.model_dump()]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                    "is_error": True, "content": "permission denied"}]}]) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "Tool said: permission denied"
    tool_result = last_request(world, "/v1/messages").json["messages"][-1]["content"][0]
    assert tool_result["is_error"] is True  # a failed tool reaches the model as a failure


def test_a_passed_through_reply_cut_midway_is_502_with_the_message_so_far(world):
    world.upstream.configure(cut_after_tokens=2)
    r = post_messages(world, {"model": "an/claude-echo", "max_tokens": 50,
                              "messages": [{"role": "user", "content": "one two three"}]})
    assert r.status_code == 502
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    partial = body["partial"]
    assert partial["type"] == "message" and partial["model"] == "an/claude-echo"
    assert partial["content"] == [{"type": "text", "text": "Echo: one ", "citations": None}]
    assert partial["stop_reason"] is None


def test_a_passed_through_stream_cut_midway_ends_with_an_error_event(world):
    world.upstream.configure(cut_after_tokens=2)
    r = post_messages(world, {"model": "an/claude-echo", "max_tokens": 50, "stream": True,
                              "messages": [{"role": "user", "content": "one two three"}]})
    assert r.status_code == 200
    assert "event: message_stop" not in r.text
    assert r.text.rstrip().splitlines()[-1].startswith('data: {"type":"error","error":{"type":"api_error"')


def test_a_messages_call_falls_through_from_an_anthropic_server_to_an_openai_one(world):
    world.upstream.configure(fail_status=529, fail_paths=["/v1/messages"])
    message = world.anthropic.messages.create(model="an/claude-echo", max_tokens=50,
                                              messages=[{"role": "user", "content": "hi"}])
    assert message.model == "oa/echo-1"  # the default answered, translated from the chat form
    assert message.content[0].text == "Echo: hi"


def test_the_spec_checks_still_come_first(world):
    body = {"model": "an/claude-echo", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}] * 201}
    r = post_messages(world, body)
    assert r.status_code == 400
    assert r.json()["type"] == "error" and "200 messages" in r.json()["error"]["message"]
    assert not [q for q in world.upstream.requests if q.path == "/v1/messages"]


def test_a_chat_request_reaches_an_openai_server_with_its_beta_header(world):
    body = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}], "seed": 7,
            "a_field_of_a_later_api_version": True, "logit_bias": {"50256": -100}}
    r = httpx.post(f"{world.base}/v1/chat/completions", json=body, timeout=30,
                   headers={"Authorization": f"Bearer {world.key}", "OpenAI-Beta": "assistants=v2"})
    assert r.status_code == 200, r.text
    sent = last_request(world, "/v1/chat/completions")
    assert sent.json == {**body, "model": "echo-1", "stream": True, "stream_options": {"include_usage": True}}
    assert sent.headers["openai-beta"] == "assistants=v2"


def test_two_choices_with_log_probabilities_come_back_whole(world):
    completion = world.openai.chat.completions.create(
        model="oa/echo-1", n=2, logprobs=True, top_logprobs=2, messages=[{"role": "user", "content": "one two"}])
    assert [c.index for c in completion.choices] == [0, 1]
    for choice in completion.choices:
        assert choice.message.content == "Echo: one two"
        assert [t.token for t in choice.logprobs.content] == ["Echo: ", "one ", "two"]
        assert len(choice.logprobs.content[0].top_logprobs) == 2
    assert last_request(world, "/v1/chat/completions").json["n"] == 2
    record = wait_for_usage(world.account)[0]
    assert record.output_tokens == completion.usage.completion_tokens == 6  # both choices, as the server counted


def test_two_choices_with_log_probabilities_come_back_streamed(world):
    stream = world.openai.chat.completions.create(
        model="oa/echo-1", n=2, logprobs=True, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "one two"}])
    texts, tokens, usage = {0: "", 1: ""}, {0: [], 1: []}, None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            tokens[choice.index] += [t.token for t in (choice.logprobs.content if choice.logprobs else None) or ()]
    assert texts == {0: "Echo: one two", 1: "Echo: one two"}
    assert tokens[0] == tokens[1] == ["Echo: ", "one ", "two"]
    assert usage.completion_tokens == 6


def test_a_stop_string_comes_back_as_the_server_named_it(world):
    completion = world.openai.chat.completions.create(
        model="oa/echo-1", stop=["three"], messages=[{"role": "user", "content": "one two three four"}])
    choice = completion.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("Echo: one two ", "stop")
    assert choice.model_extra["stop_reason"] == "three"  # vLLM's extension, passed on


def test_n_below_one_is_refused_by_name(world):
    r = httpx.post(f"{world.base}/v1/chat/completions", timeout=30, headers={"Authorization": f"Bearer {world.key}"},
                   json={"model": "oa/echo-1", "n": 0, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "n"
