"""A reply screened as it streams (gateway/guard/stream.py): a finding split across chunks caught
within the window, a placeholder split across chunks restored whole, the window's bound, and what
is held back before the first text leaves."""

from __future__ import annotations

import asyncio

import pytest

from gateway.guard import WINDOW, Blocked, Finding, Screening, parse_policy
from gateway.guard.stream import TAIL

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
FILLER = "The weather is mild today and the sea is calm. " * 6  # 282 characters, nothing to find


def screening_of(items, prompt=None):
    screening = Screening(parse_policy(items), group_name="careful", request_id="req-1")
    if prompt is not None:
        asyncio.run(screening.input(prompt))
    return screening


def stream(screening, chunks):
    """What leaves after each chunk, and after the end."""

    async def run():
        reply = screening.output()
        out = [await reply.feed(chunk) for chunk in chunks]
        return out + [await reply.end()]

    return asyncio.run(run())


def pieces(text, size):
    return [text[i:i + size] for i in range(0, len(text), size)]


def test_a_secret_split_across_chunks_is_caught_within_the_window():
    screening = screening_of([{"check": "secrets", "on": "output"}])
    reply = FILLER + f"use {AWS_KEY[:9]}" + f"{AWS_KEY[9:]} now"
    with pytest.raises(Blocked) as raised:
        stream(screening, [FILLER + "use " + AWS_KEY[:9], AWS_KEY[9:] + " now"])
    assert raised.value.finding == Finding("secrets", "AWS_ACCESS_KEY", "block", "output", 0, reply.index(AWS_KEY))
    assert raised.value.message == "The reply was stopped by the group's guardrails (secrets, output)."


def test_what_left_before_the_block_holds_none_of_the_secret():
    screening = screening_of([{"check": "secrets", "on": "output"}])
    left = []

    async def run():
        reply = screening.output()
        for chunk in pieces(FILLER * 2 + AWS_KEY + FILLER, 7):
            left.append(await reply.feed(chunk))

    with pytest.raises(Blocked):
        asyncio.run(run())
    assert "".join(left) == (FILLER * 2)[:len("".join(left))] and "AKIA" not in "".join(left)


def test_redact_rewrites_a_split_secret_and_keeps_everything_else():
    screening = screening_of([{"check": "secrets", "on": "output", "action": "redact"}])
    reply = FILLER + f"key {AWS_KEY} and " + FILLER
    out = stream(screening, pieces(reply, 5))
    assert "".join(out) == FILLER + "key <AWS_ACCESS_KEY_1> and " + FILLER
    assert screening.findings == [Finding("secrets", "AWS_ACCESS_KEY", "redact", "output", 0, len(FILLER) + 4)]


def test_nothing_leaves_before_the_window_fills_then_at_most_the_window_is_held():
    screening = screening_of([{"check": "words", "on": "output", "words": ["ProjectX"]}])
    reply = FILLER * 3
    out = stream(screening, pieces(reply, 10))
    first = next(i for i, text in enumerate(out) if text)
    assert first == WINDOW // 10  # the first chunk past WINDOW characters
    for count in range(len(out) - 1):
        sent = sum(len(text) for text in out[:count + 1])
        assert min(10 * (count + 1), len(reply)) - sent <= WINDOW
    assert "".join(out) == reply


def test_the_windows_bound_a_finding_longer_than_the_tail_is_not_caught_when_streamed():
    """A pattern spanning more than TAIL characters begins leaving before it ends: streamed, it is
    missed; the same reply whole is refused."""
    items = [{"check": "words", "on": "output", "patterns": [r"begin-[a-z]{%d}-end" % (TAIL + 50)]}]
    reply = FILLER + "begin-" + "a" * (TAIL + 50) + "-end" + FILLER
    assert "".join(stream(screening_of(items), pieces(reply, 8))) == reply
    with pytest.raises(Blocked):
        asyncio.run(screening_of(items).output().whole(reply))


def test_a_card_that_fails_luhn_streams_through_a_card_that_passes_does_not():
    items = [{"check": "pii", "on": "output", "entities": ["card"], "action": "redact"}]
    bad = FILLER + "card 4111 1111 1111 1112 ok" + FILLER
    assert "".join(stream(screening_of(items), pieces(bad, 3))) == bad
    good = FILLER + "card 4111 1111 1111 1111 ok" + FILLER
    assert "".join(stream(screening_of(items), pieces(good, 3))) == FILLER + "card <CREDIT_CARD_1> ok" + FILLER


def test_the_clients_own_values_come_back_even_split_across_chunks():
    screening = screening_of([{"check": "pii", "action": "redact", "restore": True, "entities": ["email"]}],
                             prompt=["Write to jane.doe@example.com and bob@example.org"])
    reply = "I wrote to <EMAIL_ADDRESS_1>, copying <EMAIL_ADDRESS_2>. <EMAIL_ADDRESS_9> is not one of them."
    for size in (1, 3, 7, 13):
        out = stream(screening, pieces(reply, size))
        assert "".join(out) == ("I wrote to jane.doe@example.com, copying bob@example.org. "
                                "<EMAIL_ADDRESS_9> is not one of them.")
    # without output checks nothing is held but a placeholder's start
    assert stream(screening, ["Hello <EMAIL_", "ADDRESS_1>!", " Bye"]) == [
        "Hello ", "jane.doe@example.com!", " Bye", ""]


def test_output_checks_see_the_models_placeholders_not_the_restored_values():
    screening = screening_of([{"check": "pii", "on": "both", "action": "redact", "restore": True,
                               "entities": ["email"]}], prompt=["Mail jane.doe@example.com"])
    assert "".join(stream(screening, ["Sent to <EMAIL_ADDRESS_1>; also ", "eve@example.net."])) == (
        "Sent to jane.doe@example.com; also <EMAIL_ADDRESS_2>.")
    assert [f.direction for f in screening.findings] == ["input", "output"]


def test_log_findings_are_noted_once_while_the_window_slides():
    screening = screening_of([{"check": "secrets", "on": "output", "action": "log"}])
    reply = FILLER + AWS_KEY + FILLER
    assert "".join(stream(screening, pieces(reply, 4))) == reply
    assert screening.findings == [Finding("secrets", "AWS_ACCESS_KEY", "log", "output", 0, len(FILLER))]


def test_whole_checks_a_whole_reply():
    screening = screening_of([{"check": "secrets", "on": "both", "action": "redact"}])
    assert asyncio.run(screening.output().whole(f"k={AWS_KEY}")) == "k=<AWS_ACCESS_KEY_1>"


def test_an_output_check_s_library_is_first_used_off_the_event_loop(monkeypatch, thread_hops):
    from gateway.guard import pii, stream

    monkeypatch.setattr(pii, "_recognizers", {})
    checks = parse_policy([{"check": "pii", "on": "output", "action": "redact", "entities": ["email"]}]).checks
    assert stream.cold(checks)
    screening = Screening(parse_policy([{"check": "pii", "on": "output", "action": "redact",
                                         "entities": ["email"]}]), group_name="g", request_id="r")
    out = asyncio.run(screening.output().whole("write to jane.doe@example.com"))
    assert out == "write to <EMAIL_ADDRESS_1>"
    assert len(thread_hops) == 1 and not stream.cold(checks)
