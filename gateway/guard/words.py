"""The operator's words and patterns, found whatever their disguise: both the text and the words
are folded the same way before they are compared (`fold`), and a word matches whole words only.

Folding, character by character: NFKD (full-width letters, ligatures, mathematical letters and
accents come apart), combining marks and invisible format characters (zero-width spaces and joiners,
soft hyphens) dropped, case folded, then the Cyrillic and Greek letters that look like Latin ones
read as those (`а`→a, `ο`→o, `р`→p ...). Each folded character remembers the original position it
came from, so a finding's offset and a redaction's span are in the client's own text. The injection
heuristics read the same folded text."""

from __future__ import annotations

import functools
import re
import unicodedata

# Cyrillic and Greek letters (after case folding) that a reader takes for Latin ones
LOOK_ALIKES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "и": "u", "к": "k", "м": "m", "н": "h", "о": "o",
    "п": "n", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ь": "b", "і": "i", "ї": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ɡ": "g", "ı": "i",
    "α": "a", "β": "b", "γ": "y", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ϲ": "c", "ϳ": "j", "σ": "o", "ς": "c",
})


@functools.lru_cache(maxsize=4096)
def fold_char(char: str) -> str:
    parts = unicodedata.normalize("NFKD", char)
    kept = "".join(c for c in parts if not unicodedata.combining(c) and unicodedata.category(c) != "Cf")
    return kept.casefold().translate(LOOK_ALIKES)


def fold(text: str) -> tuple[str, list[int] | None]:
    """The folded text and, for each of its characters, the position in `text` it came from (None
    when nothing moved: ASCII text is only lower-cased)."""
    if text.isascii():
        return text.lower(), None
    out: list[str] = []
    origin: list[int] = []
    for position, char in enumerate(text):
        folded = fold_char(char) if not char.isascii() else char.lower()
        out.append(folded)
        origin.extend([position] * len(folded))
    return "".join(out), origin


def fold_word(word: str) -> str:
    return fold(word)[0]


def original_span(start: int, end: int, origin: list[int] | None, length: int) -> tuple[int, int]:
    """The span of `text` a span of its folded text came from."""
    if origin is None:
        return start, end
    first = origin[start] if start < len(origin) else length
    last = origin[end - 1] + 1 if end > 0 and end - 1 < len(origin) else length
    return first, last


@functools.lru_cache(maxsize=256)
def word_pattern(words: tuple[str, ...]) -> re.Pattern | None:
    folded = sorted({fold_word(w).strip() for w in words if fold_word(w).strip()}, key=len, reverse=True)
    if not folded:
        return None
    alternatives = (r"\s+".join(re.escape(part) for part in w.split()) for w in folded)  # any spaces between
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)")


def find(text: str, words: tuple[str, ...], patterns: tuple[re.Pattern, ...]) -> list[tuple[int, int, str]]:
    """The spans of `text` where a word (entity WORD) or a pattern (entity PATTERN) is found."""
    folded, origin = fold(text)
    spans = []
    pattern = word_pattern(words)
    if pattern is not None:
        spans += [(*original_span(m.start(), m.end(), origin, len(text)), "WORD") for m in pattern.finditer(folded)]
    for regex in patterns:
        spans += [(*original_span(m.start(), m.end(), origin, len(text)), "PATTERN")
                  for m in regex.finditer(folded) if m.end() > m.start()]
    return spans
