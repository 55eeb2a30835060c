"""Signs of prompt injection and jailbreaks in what a client sends: known phrases and patterns,
each with a weight; their sum is the text's score, and a score at the check's threshold or above
is a finding (entity INJECTION, at the first sign's offset).

A strong sign ("ignore previous instructions", "you are now DAN", "reveal your system prompt")
weighs 1.0 and is enough alone at the default threshold; a weaker one (role-play set-ups, "no
restrictions", fake system markers) weighs 0.5, so two of them are needed. Each sign counts once.
The text is read folded (gateway/guard/words.py: case, accents, look-alike letters and invisible
characters), and words may be separated by any run of spaces or punctuation. Heuristics catch the
known shapes, not a determined paraphrase: a moderation model is the check for that."""

from __future__ import annotations

import re

from gateway.guard.words import fold, original_span

_ = r"[\s\W_]+"  # between words: any run of spaces or punctuation

SIGNS: tuple[tuple[float, str], ...] = (
    # overriding what came before
    (1.0, rf"\b(?:ignore|disregard|forget|skip|override){_}(?:all{_}|any{_}|the{_}|your{_}|of{_}|everything{_})*"
          rf"(?:previous|prior|above|earlier|preceding|former|initial|original|system)"
          rf"{_}(?:instructions?|prompts?|rules|directions|messages|guidelines|context)"),
    (1.0, rf"\bforget{_}(?:everything|all){_}(?:you|that){_}(?:were|have{_}been|was){_}(?:told|taught|given)"),
    # named jailbreaks
    (1.0, rf"\byou{_}are{_}now{_}(?:dan|stan|dude|aim|jailbroken|unfiltered|uncensored|unrestricted|free{_}from)\b"),
    (1.0, rf"\bdo{_}anything{_}now\b"),
    (1.0, rf"\b(?:developer|god|dan|jailbreak|unrestricted){_}mode{_}(?:enabled|activated|on)\b"),
    # the system prompt asked for
    (1.0, rf"\b(?:reveal|show|print|repeat|output|display|leak|dump|tell{_}me|give{_}me|what{_}(?:is|are))"
          rf"{_}(?:me{_})?(?:your|the){_}(?:full{_}|entire{_}|exact{_})?(?:system|hidden|initial|original|secret)"
          rf"{_}(?:prompt|instructions?|message)"),
    # role-play set-ups and lifted limits
    (0.5, rf"\b(?:pretend|imagine){_}(?:to{_}be|you{_}are|you{_}re|that{_}you{_}are)\b"),
    (0.5, rf"\b(?:act|behave|respond){_}as{_}(?:if{_}you{_}(?:are|were){_})?(?:an?{_})?"
          rf"(?:unfiltered|uncensored|unrestricted|evil|rogue|jailbroken|amoral)"),
    (0.5, rf"\b(?:role{_}?play|roleplay){_}as\b"),
    (0.5, rf"\bfrom{_}now{_}on{_}you{_}(?:are|will|must|shall)\b"),
    (0.5, rf"\b(?:without|no){_}(?:any{_})?(?:restrictions|filters|limitations|censorship|guidelines|rules)\b"),
    (0.5, rf"\bno{_}longer{_}(?:bound|restricted|limited){_}by\b"),
    (0.5, rf"\bstay{_}in{_}character\b"),
    (0.5, rf"\b(?:bypass|circumvent|disable){_}(?:your|the|all){_}(?:filters?|restrictions|safety|guidelines|rules)"),
    (0.5, rf"\b(?:new|updated|real){_}(?:system{_})?instructions{_}?:"),
    # fake turn markers
    (0.5, r"<\|im_start\|>\s*system|\[/?inst\]|\[system\]|^#{2,}\s*(?:system|instructions?)\b|<\s*/?\s*system\s*>"),
)

COMPILED = tuple((weight, re.compile(pattern, re.MULTILINE)) for weight, pattern in SIGNS)


def score(text: str) -> tuple[float, int | None]:
    """The text's score and the offset of its first sign (None when none)."""
    folded, origin = fold(text)
    total, first = 0.0, None
    for weight, regex in COMPILED:
        match = regex.search(folded)
        if match:
            total += weight
            offset = original_span(match.start(), match.end(), origin, len(text))[0]
            first = offset if first is None else min(first, offset)
    return total, first


def find(text: str, threshold: float) -> list[tuple[int, int, str]]:
    total, first = score(text)
    if first is None or total < threshold:
        return []
    return [(first, first, "INJECTION")]
