"""For the guardrails' tests through the running gateway: the values a prompt carries (an e-mail, a card
number that passes Luhn, an AWS access key id), the policies that act on them, and the calls log's row."""

from __future__ import annotations

import re

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"
AWS_KEY = "AKIAZ3MHSEXD7Q2LP4VN"
SECRETS = (EMAIL, CARD, AWS_KEY)
PROMPT = f"Write to {EMAIL}, charge {CARD}, and use the key {AWS_KEY} please"
PLACEHOLDER = re.compile(r"<[A-Z_]+_\d+>")

REDACT = [{"check": "pii", "on": "input", "action": "redact", "restore": True, "entities": ["email", "card"]},
          {"check": "secrets", "on": "input", "action": "redact"}]
BLOCK = [{"check": "secrets", "on": "input", "action": "block"}]
OUTPUT_BLOCK = [{"check": "pii", "on": "output", "action": "block", "entities": ["card"]}]
OUTPUT_REDACT = [{"check": "pii", "on": "output", "action": "redact", "entities": ["card"]}]


def guard(group, items: list[dict]) -> None:
    """The group's guardrails, saved so that the gateway's process reads them."""
    group.guardrails = items
    group.save()


def sent_texts(request) -> str:
    """The body the upstream received, as text."""
    return request.body.decode()


def assert_redacted(body: str) -> None:
    for value in SECRETS:
        assert value not in body
    assert "4111111111111111" not in body
    assert len(set(PLACEHOLDER.findall(body))) >= 3, body
