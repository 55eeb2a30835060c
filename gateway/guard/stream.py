"""A reply checked as it streams: the output checks run over a sliding window of the text, so a
finding split across chunks is caught before any of it leaves.

`feed(text)` adds a chunk's text and gives what may leave now; `end()` the rest; `whole(text)` a
whole reply at once. With local output checks (pii, secrets, words), the last `TAIL` characters
are always held back, and the held text is checked again with what comes next, each time more than
`WINDOW` characters are held: a finding up to `TAIL` characters long is caught whole wherever the
chunks split it, and a longer one is caught only if it ends within `TAIL` characters of where it
began being released (the window's bound). A finding that runs across the cut holds the cut back to
its start. The first text therefore leaves once `WINDOW` characters have come (or the reply ended):
that is the window's added latency to the first token.

Without local output checks nothing is held back but a possible placeholder's start (`<EMAIL_`)
when a pii check restores: a placeholder split across chunks is put back whole. With a remote
output check (model, webhook), the text is released in segments of `REMOTE_SEGMENT` characters, each
asked about before it leaves (a request per chunk would cost a model call per token).

The checks see the model's own text (with its placeholders); the restoration comes last, so the
client's own values are never taken for findings of the reply. Offsets count the model's text."""

from __future__ import annotations

import asyncio
import re

from gateway.guard import pii, secrets
from gateway.guard.findings import Finding

WINDOW = 200
TAIL = 160
REMOTE_SEGMENT = 1000
PLACEHOLDER = re.compile(r"<([A-Z][A-Z0-9_]*_\d+)>")
PLACEHOLDER_START = re.compile(r"<[A-Z0-9_]*")
LONGEST_PLACEHOLDER = 64


class OutputFilter:
    def __init__(self, screening, find):
        self.screening = screening
        self.find = find
        checks = screening.policy.on("output")
        self.local = tuple(c for c in checks if not c.remote)
        self.remote = tuple(c for c in checks if c.remote)
        self.pending = ""  # the model's text not yet released
        self.released = 0  # how much of the model's text was released (the offset of `pending`)
        self.segment = ""  # released by the local checks, waiting for the remote ones
        self.seen: set[tuple[int, str, int]] = set()  # (check's place, entity, offset) already noted

    async def feed(self, text: str) -> str:
        self.pending += text
        if self.local:
            if len(self.pending) <= WINDOW:
                return ""
            return await self.release(len(self.pending) - TAIL, final=False)
        return await self.release(len(self.pending), final=False)

    async def end(self) -> str:
        return await self.release(len(self.pending), final=True)

    async def whole(self, text: str) -> str:
        self.pending += text
        return await self.end()

    async def release(self, cut: int, *, final: bool) -> str:
        if cold(self.local):  # the libraries' first use in this process, on a worker thread
            await asyncio.to_thread(lambda: [self.find(check, "") for check in self.local])
        buf = self.pending
        found: list[tuple] = []  # (check, start, end, entity), spans of redacting checks
        for check in self.local:
            for start, end, entity in self.find(check, buf):
                key = (check.place, entity, self.released + start)
                if key not in self.seen:
                    self.seen.add(key)
                    self.screening.note(Finding(check.kind, entity, check.action, "output", 0, self.released + start))
                if check.action == "redact":
                    found.append((check, start, end, entity))
        if not final:
            for _check, start, end, _entity in found:
                if start < cut < end:  # runs across the cut: held whole until it ends
                    cut = start
            cut = self.placeholder_cut(buf, cut)
        out, last = [], 0
        for check, start, end, entity in sorted((f for f in found if f[2] <= cut), key=lambda f: f[1]):
            if start >= last:
                out += [buf[last:start], self.screening.placeholder(entity, buf[start:end], False)]
                last = end
        out.append(buf[last:cut])
        self.pending, self.released = buf[cut:], self.released + cut
        return self.restored(await self.checked_remotely("".join(out), final))

    def placeholder_cut(self, buf: str, cut: int) -> int:
        """`cut`, moved back to the start of a placeholder it would split, when a pii check restores."""
        if not self.screening.restore_map:
            return cut
        start = buf.rfind("<", max(0, cut - LONGEST_PLACEHOLDER), cut)
        if start >= 0 and PLACEHOLDER_START.fullmatch(buf, start, cut):
            return start
        return cut

    async def checked_remotely(self, text: str, final: bool) -> str:
        if not self.remote:
            return text
        self.segment += text
        if not self.segment or (not final and len(self.segment) < REMOTE_SEGMENT):
            return ""
        segment, self.segment = self.segment, ""
        for check in self.remote:
            redacted = await self.screening.remote(check, "output", [segment])
            if redacted is not None:
                segment = redacted[0]
        return segment

    def restored(self, text: str) -> str:
        values = self.screening.restore_map
        if not values or "<" not in text:
            return text
        return PLACEHOLDER.sub(lambda m: values.get(m.group(0), m.group(0)), text)


def cold(checks) -> bool:
    """Whether a check's library is not imported yet in this process: its first use imports it (Presidio
    and spaCy take most of a second), which is done on a worker thread rather than in the event loop."""
    return any((check.kind == "pii" and not pii.ready(check.entities))
               or (check.kind == "secrets" and not secrets.ready()) for check in checks)
