"""Guardrails: what a group's members may send to a model and what may come back to them.

A group's `guardrails` (accounts' AccountGroup, a JSON list) is read once into a `Policy`
(`policy`: `parse_policy`, `policy_of`); a call's `Screening` runs its checks on the input before any
model is called and on the reply as it streams. The checks: personal data (`pii`, Presidio's pattern
recognisers), credentials (`secrets`, detect-secrets' detectors), signs of prompt injection
(`injection`), the operator's `words` and patterns, a registry model (`model_check`) and the
operator's `webhook`; what they find (`findings`, never the text itself); the reply's sliding window
(`stream`). The call paths hand the room their texts (`texts`: each wire format's texts and their
rewrite).

Defaults, chosen here and written in the guide:
- an item's `on` is `input`, its `action` is `block`;
- a `model` or `webhook` check that fails (a timeout, an error, a non-200 answer, an answer that
  does not parse) is *closed* by default: the call is refused, since an operator who set a guard up
  would rather refuse than let through what it never saw; `fail: open` lets the call go on (the
  failure is noted as a `log` finding of entity `GUARD_FAILED`);
- `timeout` is 2 seconds (at most 30);
- an injection check's `threshold` is 1.0 (one strong phrase, or two weaker signs);
- a pii check without `entities` looks for e-mail addresses, phone numbers, card numbers
  (Luhn-checked), IBANs, IP addresses, US social security numbers, UK NHS numbers and crypto wallets;
- a streamed reply under local output checks is held back by at most `WINDOW` (200) characters, so a
  finding (or a redaction's placeholder) split across chunks is caught before any of it leaves; under
  a model or webhook output check it leaves in segments of 1,000 characters, each asked about first
  (`stream`);
- a model check's style is `llama_guard` when its model's name holds "guard", else `classifier`.

Presidio (and spaCy, which it imports) is imported only when a group has a pii check, so a process
whose groups have none never pays for it; nothing here touches the network but a webhook check's
own POST (tldextract, which Presidio's e-mail recogniser uses, reads its bundled suffix list).

May import: `gateway.cache` and below (it sits below `calls`, which runs it; the model check asks
a registry model through the caller `gateway/apps.py` hands `model_check.use` at start-up)."""

from gateway.guard.findings import Blocked, Finding
from gateway.guard.policy import Check, Policy, PolicyError, parse_policy, policy_of
from gateway.guard.screening import Screening
from gateway.guard.stream import WINDOW, OutputFilter

__all__ = ["WINDOW", "Blocked", "Check", "Finding", "OutputFilter", "Policy", "PolicyError", "Screening",
           "parse_policy", "policy_of"]
