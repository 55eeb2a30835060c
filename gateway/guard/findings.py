"""What a check found, and the refusal it leads to. Neither ever holds the matched text: a finding
says which check, what kind of thing (`entity`), what was done, in which direction, in which text
of the list and how many characters into it; that is what the calls log, the metrics and the trace
keep, and what a refusal may say."""

from __future__ import annotations

from dataclasses import dataclass

GUARD_FAILED = "GUARD_FAILED"  # the entity of a model or webhook check that could not answer
INVALID_POLICY = "INVALID_POLICY"  # the entity of a refusal by a stored list that does not parse


@dataclass(frozen=True)
class Finding:
    check: str  # pii, secrets, injection, words, model, webhook (policy: a list that does not parse)
    entity: str  # EMAIL_ADDRESS, CREDIT_CARD, AWS_ACCESS_KEY, INJECTION, WORD, UNSAFE ...
    action: str  # block, redact or log: what was done
    direction: str  # input or output
    index: int  # which text of the list (for output: 0)
    offset: int  # characters into that text as the check read it (after the checks before it), or into the reply

    def as_dict(self) -> dict:
        return {"check": self.check, "entity": self.entity, "action": self.action, "direction": self.direction,
                "index": self.index, "offset": self.offset}


class Blocked(Exception):
    """A call refused, or a reply stopped, by a check whose action is block (or a guard that could
    not answer, failing closed)."""

    def __init__(self, finding: Finding):
        self.finding = finding
        if finding.entity == INVALID_POLICY:
            self.message = "The request was refused: the group's guardrails are not valid."
        elif finding.entity == GUARD_FAILED:
            self.message = (f"The {'request' if finding.direction == 'input' else 'reply'} was refused: the group's "
                            f"guardrails could not check it ({finding.check}, {finding.direction}).")
        elif finding.direction == "input":
            self.message = f"The request was refused by the group's guardrails ({finding.check}, input)."
        else:
            self.message = f"The reply was stopped by the group's guardrails ({finding.check}, output)."
        super().__init__(self.message)


class GuardFailure(Exception):
    """A model or webhook check that gave no usable answer: its fail mode decides. The reason is
    for the log (it never holds the texts)."""
