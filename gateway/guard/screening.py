"""One call's screening: its input checked before any model is called, its reply as it leaves.

    screening = Screening(policy, group_name=group.name, request_id=request_id)
    texts = await screening.input(texts)          # raises Blocked; redactions applied
    reply = screening.output()                    # gateway/guard/stream.py OutputFilter
    out = await reply.feed(chunk_text) ... out = await reply.end()

The local checks run first, in the list's order, each on what the one before left (so a later
check never sees a value an earlier one replaced); then the remote ones (model, webhook) together,
on the texts as redacted. A credential cut in two across neighbouring texts (one message ends with
half of it, the next begins with the rest) is found on their joined edges. A redaction is
consistent within the call: the same value is the same placeholder (`<EMAIL_ADDRESS_1>`) in every
text of the request, and a pii check with `restore` keeps the map from placeholder to value so the
reply gives the client its own data back, while the model never saw it. `findings` grows with
every finding, log ones too."""

from __future__ import annotations

import asyncio
import logging

from gateway.guard import injection, model_check, pii, secrets, webhook, words
from gateway.guard.findings import GUARD_FAILED, INVALID_POLICY, Blocked, Finding, GuardFailure
from gateway.guard.policy import Check, Policy
from gateway.guard.stream import OutputFilter, cold

log = logging.getLogger(__name__)

INLINE_CHARS = 16_000  # longer input is scanned on a worker thread
SEAM = 200  # how much of each side of two neighbouring texts is read for a credential cut between them


def find(check: Check, text: str) -> list[tuple[int, int, str]]:
    """The spans a local check finds in `text`: (start, end, entity), in order, without overlaps."""
    if check.kind == "pii":
        return pii.find(text, check.entities)
    if check.kind == "secrets":
        return secrets.find(text)
    if check.kind == "words":
        return words.find(text, check.words, check.patterns)
    return injection.find(text, check.threshold)


class Screening:
    def __init__(self, policy: Policy, *, group_name: str, request_id: str):
        self.policy = policy
        self.group_name = group_name
        self.request_id = request_id
        self.findings: list[Finding] = []
        self.restore_map: dict[str, str] = {}  # placeholder -> the client's value, for restore
        self.prompt = ""  # the request's last text as the model saw it (an output model check judges the pair)
        self._placeholders: dict[tuple[str, str], str] = {}
        self._counts: dict[str, int] = {}

    # -- shared by the input and the reply ------------------------------------------------------

    def note(self, finding: Finding) -> None:
        self.findings.append(finding)
        if finding.action == "block":
            raise Blocked(finding)

    def placeholder(self, entity: str, value: str, restore: bool) -> str:
        key = (entity, value)
        found = self._placeholders.get(key)
        if found is None:
            self._counts[entity] = self._counts.get(entity, 0) + 1
            found = self._placeholders[key] = f"<{entity}_{self._counts[entity]}>"
        if restore:
            self.restore_map[found] = value
        return found

    def redact(self, check: Check, text: str, spans: list[tuple[int, int, str]]) -> str:
        parts, last = [], 0
        for start, end, entity in spans:
            parts += [text[last:start], self.placeholder(entity, text[start:end], check.restore)]
            last = end
        return "".join(parts) + text[last:]

    async def remote(self, check: Check, direction: str, texts: list[str]) -> list[str] | None:
        """A model or webhook check's verdict on `texts`: None to go on unchanged, new texts for a
        webhook's redaction; Blocked raised for a block (or a failure, failing closed)."""
        try:
            if check.kind == "model":
                verdict, entity = await model_check.verdict(check, direction, texts, self.prompt)
                redacted = None
            else:
                answer = await webhook.ask(check, direction=direction, group=self.group_name,
                                           request_id=self.request_id, texts=texts)
                verdict, entity, redacted = answer.action, "WEBHOOK", answer.texts
        except GuardFailure as failure:
            log.warning("guardrail %s (%s) failed for request %s: %s", check.kind, direction, self.request_id, failure)
            self.note(Finding(check.kind, GUARD_FAILED, "block" if check.fail == "closed" else "log", direction, 0, 0))
            return None
        if verdict == "allow":
            return None
        action = "log" if check.action == "log" else ("redact" if verdict == "redact" else "block")
        self.note(Finding(check.kind, entity if verdict == "block" else "WEBHOOK_REDACT", action, direction, 0, 0))
        return redacted if action == "redact" else None

    # -- the input ------------------------------------------------------------------------------

    async def input(self, texts: list[str]) -> list[str]:
        if self.policy.errors:
            self.note(Finding("policy", INVALID_POLICY, "block", "input", 0, 0))
        checks = self.policy.on("input")
        if sum(len(t) for t in texts) > INLINE_CHARS or cold(checks):  # it would hold the event loop
            texts = await asyncio.to_thread(self.local_input, checks, texts)
        else:
            texts = self.local_input(checks, texts)
        remote = [check for check in checks if check.remote]
        if remote:
            # asked together; a block (or a failure, failing closed) is raised in the list's order
            results = await asyncio.gather(*(self.remote(c, "input", texts) for c in remote), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result
                if result is not None:
                    texts = result
        self.prompt = texts[-1] if texts else ""
        return texts

    def local_input(self, checks: tuple[Check, ...], texts: list[str]) -> list[str]:
        texts = list(texts)
        for check in checks:
            if check.remote:
                continue
            for index, text in enumerate(texts):
                spans = find(check, text) if text else []
                for start, _end, entity in spans:
                    self.note(Finding(check.kind, entity, check.action, "input", index, start))
                if spans and check.action == "redact":
                    texts[index] = self.redact(check, text, spans)
            if check.kind == "secrets":
                self.seams(check, texts)
        return texts

    def seams(self, check: Check, texts: list[str]) -> None:
        """A credential cut in two across neighbouring texts (the end of one message, the start of
        the next): found on their joined edges, noted in the first, redacted in both."""
        for index in range(len(texts) - 1):
            left, right = texts[index][-SEAM:], texts[index + 1][:SEAM]
            if not left or not right:
                continue
            for start, end, entity in secrets.find(left + right):
                if not start < len(left) < end:
                    continue
                offset = len(texts[index]) - len(left) + start
                self.note(Finding(check.kind, entity, check.action, "input", index, offset))
                if check.action == "redact":
                    value = left[start:] + right[:end - len(left)]
                    texts[index] = texts[index][:offset] + self.placeholder(entity, value, False)
                    texts[index + 1] = texts[index + 1][end - len(left):]

    # -- the reply ------------------------------------------------------------------------------

    def output(self) -> OutputFilter:
        return OutputFilter(self, find)
