"""/v1/messages to an OpenAI-compatible server, through the official anthropic SDK: each field
carried reaches the server as its chat counterpart (the reference upstream records the chat
request), and a field the chat form cannot carry is refused by name, or left out when the server
drops unsupported fields (docs/compatibility.md)."""

import anthropic
import pytest

MODEL = "oa/echo-1"
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
          "additionalProperties": False}


def test_top_k_user_id_output_config_and_stops_reach_the_server(world):
    message = world.anthropic.messages.create(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hello"}], metadata={"user_id": "user-3"},
        stop_sequences=["END"], output_config={"format": {"type": "json_schema", "schema": PERSON}, "effort": "low"},
        extra_body={"top_k": 5})
    assert message.content[0].text == "Echo: hello"
    sent = world.upstream.last.json
    assert sent["top_k"] == 5 and sent["user"] == "user-3" and sent["stop"] == ["END"]
    assert sent["reasoning_effort"] == "low"
    assert sent["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "output", "schema": PERSON, "strict": True}}


def test_a_failed_tool_and_a_mid_conversation_system_message_reach_the_server(world):
    tools = [{"name": "weather", "input_schema": {"type": "object", "properties": {}}}]
    message = world.anthropic.messages.create(
        model=MODEL, max_tokens=50, tools=tools, system=[{"type": "text", "text": "Be brief.",
                                                          "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "weather?"},
                  {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather",
                                                     "input": {}}]},
                  {"role": "system", "content": "Tools may fail; say so."},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                                                "content": [{"type": "text", "text": "no network"},
                                                            {"type": "text", "text": "retry later"}]}]}])
    sent = world.upstream.last.json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "system", "tool"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert sent[3] == {"role": "system", "content": "Tools may fail; say so."}
    assert sent[4] == {"role": "tool", "tool_call_id": "toolu_1", "content": [
        {"type": "text", "text": "Error: no network"}, {"type": "text", "text": "retry later"}]}
    assert message.content[0].text == "Tool said: Error: no network retry later"


def test_cache_control_everywhere_is_no_refusal(world):
    """Claude Code marks its prompt for caching on nearly every request; a chat server caches
    prompt prefixes by itself, so the marks are left out without a refusal."""
    cached = {"type": "ephemeral"}
    message = world.anthropic.messages.create(
        model=MODEL, max_tokens=50, cache_control=cached,
        tools=[{"name": "now", "input_schema": {"type": "object"}, "cache_control": cached}],
        tool_choice={"type": "none"},
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": cached}]}])
    assert message.content[0].text == "Echo: hi"
    assert "cache_control" not in str(world.upstream.last.json)


def test_thinking_is_left_out_when_the_server_drops_unsupported_fields(world):
    world.oa.drop_unsupported_fields = True
    world.oa.save()
    thinking = {"type": "enabled", "budget_tokens": 1024}
    message = world.anthropic.messages.create(model=MODEL, max_tokens=2000, thinking=thinking,
                                              messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "Echo: hi"
    assert "thinking" not in world.upstream.last.json


def test_a_matched_stop_string_reads_back_as_a_stop_sequence(world):
    """The server names the stop string it matched (vLLM's choice `stop_reason`)."""
    messages = [{"role": "user", "content": "one two STOP three"}]
    message = world.anthropic.messages.create(model=MODEL, max_tokens=50, messages=messages,
                                              stop_sequences=["STOP"])
    assert (message.content[0].text, message.stop_reason, message.stop_sequence) == (
        "Echo: one two ", "stop_sequence", "STOP")
    with world.anthropic.messages.stream(model=MODEL, max_tokens=50, messages=messages,
                                         stop_sequences=["never", "STOP"]) as stream:
        final = stream.get_final_message()
    assert (final.content[0].text, final.stop_reason, final.stop_sequence) == (
        "Echo: one two ", "stop_sequence", "STOP")


@pytest.mark.parametrize("fields, name", [
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
    ({"extra_body": {"context_management": {"edits": []}}}, "context_management"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools.0 (web_search_20250305)")])
def test_a_field_the_chat_form_cannot_carry_is_refused_by_name(world, fields, name):
    world.default.is_default = False
    world.default.save()
    with pytest.raises(anthropic.BadRequestError) as info:
        world.anthropic.messages.create(model=MODEL, max_tokens=2000,
                                        messages=[{"role": "user", "content": "hi"}], **fields)
    assert f"'{name}'" in info.value.body["error"]["message"]
    assert world.upstream.requests == []

