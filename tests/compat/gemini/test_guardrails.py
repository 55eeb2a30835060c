"""A group's guardrails on Google's Gemini surface, read by google-genai: a prompt's values redacted on
their way to the model (translated to either kind) and restored in the reply, a block refused as
Google's INVALID_ARGUMENT with nothing sent on, a streamed card number cut in Google's in-stream error."""

from __future__ import annotations

import pytest
from google.genai import errors, types

from tests.compat.guard_support import (
    AWS_KEY,
    BLOCK,
    CARD,
    EMAIL,
    OUTPUT_BLOCK,
    PROMPT,
    REDACT,
    assert_redacted,
    guard,
    sent_texts,
)


@pytest.mark.parametrize("model", ["oa/echo-1", "an/claude-echo"])
def test_a_gemini_prompt_is_redacted_and_its_reply_restored(world, gemini, model):
    guard(world.group, REDACT)
    config = types.GenerateContentConfig(system_instruction=f"the customer is {EMAIL}")
    text = gemini.models.generate_content(model=model, contents=PROMPT, config=config).text
    assert_redacted(sent_texts(world.upstream.last))
    assert EMAIL not in sent_texts(world.upstream.last)
    assert EMAIL in text and CARD in text


def test_a_gemini_block_is_invalid_argument_and_nothing_goes_up(world, gemini):
    guard(world.group, BLOCK)
    with pytest.raises(errors.ClientError) as refused:
        gemini.models.generate_content(model="oa/echo-1", contents=PROMPT)
    assert (refused.value.code, refused.value.status) == (400, "INVALID_ARGUMENT")
    assert AWS_KEY not in str(refused.value)
    assert world.upstream.requests == []


def test_a_streamed_card_is_cut_in_googles_error(world, gemini):
    guard(world.group, OUTPUT_BLOCK)
    world.upstream.configure(reply=f"your card is {CARD} as we said before")
    received = []
    with pytest.raises(errors.ClientError) as cut:
        for chunk in gemini.models.generate_content_stream(model="oa/echo-1", contents="which card?"):
            received.append(chunk.text or "")
    assert (cut.value.code, cut.value.status) == (400, "INVALID_ARGUMENT")
    assert "4111" not in "".join(received)
