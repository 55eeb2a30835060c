"""streamGenerateContent's chunks -> chat-completion chunks (gateway.formats.gemini.streams). Every
Gemini chunk is read by google-genai's GenerateContentResponse first (its field names, and nothing
else), every chat chunk by the OpenAI SDK's ChatCompletionChunk (support.py)."""

import base64
import json

import httpx
import pytest
from openai.types.chat import ChatCompletion

from gateway.formats import StreamError
from gateway.formats.gemini import GeminiToChatStream, gemini_usage
from gateway.upstream.replies import ReplyAccumulator
from tests.gateway.formats.gemini.support import deltas, google_client, translate

ROLE = {"role": "assistant", "content": ""}


def text(piece, *, thought=False, index=None, finish=None, usage=None):
    part = {"text": piece, **({"thought": True} if thought else {})}
    return chunk([part], index=index, finish=finish, usage=usage)


def chunk(parts, *, index=None, finish=None, usage=None):
    candidate = {"content": {"role": "model", "parts": parts}}
    if index is not None:
        candidate["index"] = index
    if finish is not None:
        candidate["finishReason"] = finish
    out = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": "r-1"}
    if usage is not None:
        out["usageMetadata"] = usage
    return out


def usage(prompt, candidates, **more):
    return {"promptTokenCount": prompt, "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates + sum(more.values()), **more}


def test_text_with_usage_in_every_chunk_as_the_gemini_api_sends_it():
    chunks, stream = translate([text("Hel", usage=usage(5, 1)), text("lo", usage=usage(5, 2)),
                                text("", finish="STOP", usage=usage(5, 2))])
    assert deltas(chunks) == [(0, ROLE, None), (0, {"content": "Hel"}, None), (0, {"content": "lo"}, None),
                              (0, {}, "stop"),
                              ("usage", {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7})]
    assert stream.finished
    assert chunks[0] == {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                         "model": "gem/flash", "usage": None,
                         "choices": [{"index": 0, "delta": ROLE, "finish_reason": None, "logprobs": None}]}


def test_thoughts_are_reasoning_and_count_as_completion():
    metadata = usage(10, 4, thoughtsTokenCount=30, cachedContentTokenCount=8, toolUsePromptTokenCount=2)
    chunks, _ = translate([text("Let me think", thought=True), text("42", finish="STOP", usage=metadata)])
    assert deltas(chunks) == [
        (0, ROLE, None), (0, {"reasoning_content": "Let me think"}, None), (0, {"content": "42"}, None),
        (0, {}, "stop"),
        ("usage", {"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46,
                   "prompt_tokens_details": {"cached_tokens": 8},
                   "completion_tokens_details": {"reasoning_tokens": 30}})]


def test_function_calls_whole_with_their_signature_in_the_id():
    calls = [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"},
             {"functionCall": {"id": "fc-2", "name": "time", "args": {}}}]
    chunks, stream = translate([text("Looking."), chunk(calls, finish="STOP", usage=usage(9, 6))])
    first, second = (c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[2:4])
    assert first["id"].startswith("call_") and first["id"].endswith("__thought__c2ln")
    assert first == {"index": 0, "id": first["id"], "type": "function",
                     "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
    assert second == {"index": 1, "id": "fc-2", "type": "function", "function": {"name": "time", "arguments": "{}"}}
    assert deltas(chunks)[4] == (0, {}, "tool_calls")


@pytest.mark.parametrize(("reason", "finish"), [
    ("MAX_TOKENS", "length"), ("SAFETY", "content_filter"), ("RECITATION", "content_filter"),
    ("BLOCKLIST", "content_filter"), ("PROHIBITED_CONTENT", "content_filter"), ("SPII", "content_filter"),
    ("IMAGE_SAFETY", "content_filter"), ("OTHER", "stop"), ("MALFORMED_FUNCTION_CALL", "stop"),
    ("LANGUAGE", "stop"),
])
def test_finish_reasons(reason, finish):
    chunks, _ = translate([text("Partial", finish=reason)])
    assert deltas(chunks)[-1] == (0, {}, finish)


def test_a_function_call_cut_short_by_length_stays_length():
    call = [{"functionCall": {"name": "weather", "args": {}}}]
    chunks, _ = translate([chunk(call, finish="MAX_TOKENS")])
    assert deltas(chunks)[-1] == (0, {}, "length")


def test_log_probabilities_go_with_the_text_of_their_chunk():
    result = {"chosenCandidates": [{"token": "Hé", "tokenId": 5, "logProbability": -0.25},
                                   {"token": "!", "tokenId": 6, "logProbability": -1.5}],
              "topCandidates": [{"candidates": [{"token": "Hé", "tokenId": 5, "logProbability": -0.25},
                                                {"token": "Hi", "tokenId": 7, "logProbability": -2.0}]},
                                {"candidates": [{"token": "!", "tokenId": 6, "logProbability": -1.5}]}],
              "logProbabilitySum": -1.75}
    first = text("Hé!")
    first["candidates"][0].update(logprobsResult=result, avgLogprobs=-0.875)
    thinking = text("Hmm", thought=True)
    thinking["candidates"][0]["logprobsResult"] = {"chosenCandidates": [{"token": "Hmm", "logProbability": -0.5}]}
    chunks, _ = translate([first, thinking])
    assert chunks[1]["choices"][0] == {"index": 0, "delta": {"content": "Hé!"}, "finish_reason": None, "logprobs": {
        "refusal": None, "content": [
            {"token": "Hé", "logprob": -0.25, "bytes": [72, 195, 169], "top_logprobs": [
                {"token": "Hé", "logprob": -0.25, "bytes": [72, 195, 169]},
                {"token": "Hi", "logprob": -2.0, "bytes": [72, 105]}]},
            {"token": "!", "logprob": -1.5, "bytes": [33], "top_logprobs": [
                {"token": "!", "logprob": -1.5, "bytes": [33]}]}]}}
    assert [c["choices"][0]["delta"] for c in chunks[2:4]] == [{}, {"reasoning_content": "Hmm"}]
    assert chunks[2]["choices"][0]["logprobs"]["content"] == [
        {"token": "Hmm", "logprob": -0.5, "bytes": [72, 109, 109], "top_logprobs": []}]


def test_a_blocked_prompt_is_a_refusal():
    feedback = {"blockReason": "PROHIBITED_CONTENT", "blockReasonMessage": "Not allowed.",
                "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH", "blocked": True}]}
    chunks, stream = translate([{"promptFeedback": feedback, "usageMetadata": {"promptTokenCount": 7,
                                                                                 "totalTokenCount": 7}}])
    assert deltas(chunks) == [
        (0, ROLE, None), (0, {"refusal": "The prompt was blocked (PROHIBITED_CONTENT). Not allowed."}, None),
        (0, {}, "content_filter"), ("usage", {"prompt_tokens": 7, "completion_tokens": 0, "total_tokens": 7})]
    assert stream.finished


def test_candidates_are_choices_by_index():
    chunks, _ = translate([{"candidates": [{"content": {"role": "model", "parts": [{"text": "A"}]}},
                                           {"content": {"role": "model", "parts": [{"text": "B"}]}, "index": 1}]},
                           chunk([{"text": "!"}], index=1, finish="STOP"), text("?", finish="MAX_TOKENS")])
    assert deltas(chunks) == [(0, ROLE, None), (0, {"content": "A"}, None), (1, ROLE, None),
                              (1, {"content": "B"}, None), (1, {"content": "!"}, None), (1, {}, "stop"),
                              (0, {"content": "?"}, None), (0, {}, "length")]


def test_the_chunks_gather_into_a_completion_the_openai_sdk_reads():
    """What a client asking for a whole reply gets: the gateway's gathering of the chunks."""
    blocked, _ = translate([{"promptFeedback": {"blockReason": "SAFETY"}}])
    calls = [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]
    called, _ = translate([text("Hmm", thought=True), chunk(calls, finish="STOP", usage=usage(4, 2))])
    two, _ = translate([text("A", finish="STOP"), chunk([{"text": "B"}], index=1, finish="MAX_TOKENS")])
    completions = []
    for chunks in (blocked, called, two):
        gathered = ReplyAccumulator()
        for c in chunks:
            gathered.feed(c)
        completion = gathered.completion(completion_id="chatcmpl-1", model="gem/flash", created=1700000000,
                                         usage=usage_of(chunks))
        ChatCompletion.model_validate(completion)
        completions.append(completion["choices"])
    assert completions[0] == [{"index": 0, "finish_reason": "content_filter", "logprobs": None, "message": {
        "role": "assistant", "content": "", "refusal": "The prompt was blocked (SAFETY)."}}]
    message = completions[1][0]["message"]
    assert (message["reasoning_content"], message["tool_calls"][0]["function"], completions[1][0]["finish_reason"]) == (
        "Hmm", {"name": "weather", "arguments": '{"city": "Paris"}'}, "tool_calls")
    assert [(c["message"]["content"], c["finish_reason"]) for c in completions[2]] == [("A", "stop"), ("B", "length")]


def usage_of(chunks):
    found = [c["usage"] for c in chunks if c.get("usage")]
    return found[-1] if found else {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def test_the_stream_is_finished_once_every_choice_is():
    stream = GeminiToChatStream("chatcmpl-1", "gem/flash", 1700000000)
    stream.feed({"candidates": [{"content": {"role": "model", "parts": [{"text": "A"}]}},
                                {"content": {"role": "model", "parts": [{"text": "B"}]}, "index": 1}]})
    stream.feed(chunk([{"text": "!"}], index=1, finish="STOP"))
    assert not stream.finished
    stream.feed(text("", finish="STOP"))
    assert stream.finished


def test_a_stream_that_ends_without_a_finish_reason_is_closed_by_end():
    chunks, stream = translate([text("Hi"), chunk([{"functionCall": {"name": "f", "args": {}}}], index=1)], end=False)
    assert not stream.finished
    assert deltas(stream.end()) == [(0, {}, "stop"), (1, {}, "tool_calls")]
    assert stream.end() == []


def test_without_usage_asked_or_seen():
    chunks, stream = translate([text("Hi", finish="STOP", usage=usage(1, 1))], include_usage=False)
    assert all("usage" not in c for c in chunks) and len(chunks) == 3
    assert stream.usage == {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    chunks, stream = translate([text("Hi", finish="STOP")])
    assert [c for c in chunks if not c["choices"]] == [] and stream.usage is None


def test_parts_the_chat_form_has_no_place_for_are_passed_over():
    parts = [{"text": "", "thoughtSignature": "c2ln"}, {"executableCode": {"language": "PYTHON", "code": "1+1"}},
             {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2"}}, {"text": "2"}]
    chunks, _ = translate([chunk(parts, finish="STOP")])
    assert deltas(chunks) == [(0, ROLE, None), (0, {"content": "2"}, None), (0, {}, "stop")]


def test_an_output_tool_s_call_is_the_reply_s_text():
    call = [{"functionCall": {"name": "json_output", "args": {"city": "Paris"}}}]
    chunks, _ = translate([chunk(call, finish="STOP")], output_tool="json_output")
    assert deltas(chunks) == [(0, ROLE, None), (0, {"content": json.dumps({"city": "Paris"})}, None), (0, {}, "stop")]


def test_an_error_inside_the_stream():
    stream = GeminiToChatStream("chatcmpl-1", "gem/flash", 1700000000)
    with pytest.raises(StreamError) as failed:
        stream.feed({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})
    assert (failed.value.type, failed.value.message) == ("UNAVAILABLE", "The model is overloaded.")


@pytest.mark.parametrize("bad", [
    [], {"candidates": {}}, {"candidates": ["x"]}, {"candidates": [{"index": "0"}]},
    {"candidates": [{"content": {"parts": {"text": "x"}}}]}, {"candidates": [{"content": {"parts": [{"text": 5}]}}]},
    {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
    {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": "{}"}}]}}]},
    {"candidates": [{"finishReason": 1}]}, {"usageMetadata": []}, {"promptFeedback": {"blockReason": 2}},
    {"candidates": [{"logprobsResult": []}]}, {"candidates": [{"logprobsResult": {"chosenCandidates": {}}}]},
    {"candidates": [{"logprobsResult": {"chosenCandidates": [{"token": 1}]}}]},
])
def test_a_chunk_gemini_does_not_send_is_malformed(bad):
    with pytest.raises(ValueError):
        GeminiToChatStream("chatcmpl-1", "gem/flash", 1700000000).feed(bad)


def test_usage_counts_only_what_gemini_counted():
    assert gemini_usage({}) == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert gemini_usage({"promptTokenCount": 3, "candidatesTokenCount": 2, "cachedContentTokenCount": 0,
                         "thoughtsTokenCount": True}) == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_what_google_genai_reads_from_the_same_stream_is_what_the_chunks_say():
    """The same chunks as the SSE stream Gemini sends, read by google-genai's generate_content_stream:
    its text, thoughts, calls and usage are the chat chunks'."""
    calls = [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"}]
    gemini_chunks = [text("Hmm", thought=True), text("Hel"), text("lo"),
                     chunk(calls, finish="STOP", usage=usage(5, 3, thoughtsTokenCount=2))]
    chunks, _ = translate(gemini_chunks)
    sse = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in gemini_chunks)
    client = google_client(lambda request: httpx.Response(200, text=sse,
                                                          headers={"content-type": "text/event-stream"}))
    read = list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="Hi"))
    said = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    sdk_parts = [part for response in read for part in response.candidates[0].content.parts]
    assert [d["reasoning_content"] for d in said if "reasoning_content" in d] == [
        part.text for part in sdk_parts if part.thought]
    assert "".join(d.get("content") or "" for d in said) == "".join(
        part.text for part in sdk_parts if part.text and not part.thought)
    (call,) = [d["tool_calls"][0] for d in said if "tool_calls" in d]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == (
        read[-1].function_calls[0].name, read[-1].function_calls[0].args)
    assert base64.urlsafe_b64decode(call["id"].split("__thought__")[1] + "==") == sdk_parts[-1].thought_signature
    metadata = read[-1].usage_metadata
    assert chunks[-1]["usage"]["completion_tokens"] == metadata.candidates_token_count + metadata.thoughts_token_count
