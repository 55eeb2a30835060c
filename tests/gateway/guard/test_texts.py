"""The texts of a request in each wire format, and their rewrite (gateway/guard/texts.py)."""

from __future__ import annotations

import copy

import pytest

from gateway.guard.texts import ANTHROPIC, CHAT, GEMINI, OPENAI, rewritten, texts_of


def upper(texts: list[str]) -> list[str]:
    return [text.upper() for text in texts]


CHAT_BODY = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "text", "text": "dev note"}]},
        {"role": "user", "content": [{"type": "text", "text": "hello"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"q\": \"x\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "tool said"},
        {"role": "assistant", "content": "answer", "refusal": "no"},
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "left alone"}}],
}


def test_chat_texts_are_every_role_and_part_and_tool_call():
    assert texts_of(CHAT, CHAT_BODY) == ["be brief", "dev note", "hello", "{\"q\": \"x\"}", "tool said", "answer", "no"]
    assert texts_of(OPENAI, CHAT_BODY) == texts_of(CHAT, CHAT_BODY)


def test_a_rewrite_is_a_copy_with_the_texts_in_their_places():
    before = copy.deepcopy(CHAT_BODY)
    after = rewritten(CHAT, CHAT_BODY, upper(texts_of(CHAT, CHAT_BODY)))
    assert CHAT_BODY == before  # the client's body as it came
    assert after["messages"][0]["content"] == "BE BRIEF"
    assert after["messages"][1]["content"] == [{"type": "text", "text": "DEV NOTE"}]
    assert after["messages"][2]["content"][1] == CHAT_BODY["messages"][2]["content"][1]
    assert after["messages"][3]["tool_calls"][0]["function"] == {"name": "f", "arguments": "{\"Q\": \"X\"}"}
    assert after["messages"][4]["content"] == "TOOL SAID"
    assert after["tools"] == CHAT_BODY["tools"]
    assert texts_of(CHAT, after) == upper(texts_of(CHAT, CHAT_BODY))


def test_an_unchanged_rewrite_is_the_body_itself():
    assert rewritten(CHAT, CHAT_BODY, texts_of(CHAT, CHAT_BODY)) is CHAT_BODY


def test_a_rewrite_with_the_wrong_count_is_refused():
    with pytest.raises(ValueError):
        rewritten(CHAT, CHAT_BODY, ["one"])


ANTHROPIC_BODY = {
    "model": "m", "max_tokens": 10,
    "system": [{"type": "text", "text": "sys one"},
               {"type": "text", "text": "sys two", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "plain"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "kept", "signature": "sig"},
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "arg", "n": 3, "xs": ["in list"]}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "result string"},
            {"type": "tool_result", "tool_use_id": "t2", "content": [
                {"type": "text", "text": "result block", "cache_control": {"type": "ephemeral"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc text"},
             "context": "doc context"},
            {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "inner doc"}]}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"}},
            {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "found"}]},
            {"type": "text", "text": "question", "cache_control": {"type": "ephemeral"}},
        ]},
    ],
}


def test_anthropic_texts_are_system_blocks_tool_results_documents_and_tool_input():
    assert texts_of(ANTHROPIC, ANTHROPIC_BODY) == [
        "sys one", "sys two", "plain", "calling", "arg", "in list", "result string", "result block", "doc text",
        "doc context", "inner doc", "found", "question"]


def test_an_anthropic_rewrite_keeps_cache_control_thinking_and_binary_data():
    after = rewritten(ANTHROPIC, ANTHROPIC_BODY, upper(texts_of(ANTHROPIC, ANTHROPIC_BODY)))
    assert after["system"][1] == {"type": "text", "text": "SYS TWO", "cache_control": {"type": "ephemeral"}}
    assert after["messages"][1]["content"][0] == {"type": "thinking", "thinking": "kept", "signature": "sig"}
    assert after["messages"][1]["content"][2]["input"] == {"q": "ARG", "n": 3, "xs": ["IN LIST"]}
    blocks = after["messages"][2]["content"]
    assert blocks[1]["content"][0] == {"type": "text", "text": "RESULT BLOCK", "cache_control": {"type": "ephemeral"}}
    assert blocks[1]["content"][1] == ANTHROPIC_BODY["messages"][2]["content"][1]["content"][1]
    assert blocks[2]["source"]["data"] == "DOC TEXT"
    assert blocks[4] == ANTHROPIC_BODY["messages"][2]["content"][4]
    assert blocks[6]["text"] == "QUESTION"


def test_an_anthropic_system_string():
    body = {"system": "only one", "messages": [{"role": "user", "content": "hi"}]}
    assert texts_of(ANTHROPIC, body) == ["only one", "hi"]
    assert rewritten(ANTHROPIC, body, ["a", "b"]) == {"system": "a", "messages": [{"role": "user", "content": "b"}]}


GEMINI_BODY = {
    "systemInstruction": {"parts": [{"text": "gem sys"}]},
    "contents": [
        {"role": "user", "parts": [{"text": "gem hi"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"q": "call arg"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"out": ["resp text"]}}}]},
    ],
}


def test_gemini_texts_are_system_parts_and_function_calls_and_results():
    assert texts_of(GEMINI, GEMINI_BODY) == ["gem sys", "gem hi", "call arg", "resp text"]
    after = rewritten(GEMINI, GEMINI_BODY, upper(texts_of(GEMINI, GEMINI_BODY)))
    assert after["contents"][0]["parts"][1] == GEMINI_BODY["contents"][0]["parts"][1]
    assert after["contents"][2]["parts"][0]["functionResponse"]["response"] == {"out": ["RESP TEXT"]}


def test_gemini_snake_case_and_a_single_content():
    body = {"system_instruction": {"parts": [{"text": "s"}]},
            "contents": {"parts": [{"text": "t"}, {"function_response": {"response": {"r": "u"}}}]}}
    assert texts_of(GEMINI, body) == ["s", "t", "u"]
    after = rewritten(GEMINI, body, ["S", "T", "U"])
    assert after["contents"]["parts"][1]["function_response"] == {"response": {"r": "U"}}


def test_malformed_bodies_have_the_texts_they_have():
    assert texts_of(CHAT, {"messages": "nope"}) == []
    assert texts_of(ANTHROPIC, {"messages": [None, {"content": [None, 3, {"type": "text"}]}]}) == []
    assert texts_of(GEMINI, {"contents": [{"parts": None}]}) == []


def test_an_unknown_format_is_an_error():
    with pytest.raises(ValueError):
        texts_of("cohere", {})
