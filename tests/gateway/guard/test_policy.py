"""A group's guardrails read into a policy (gateway/guard/policy.py): the issue's items as written,
their defaults, every error named by its place, and the policy kept per group until its list
changes."""

from __future__ import annotations

import pytest

from gateway.guard import PolicyError, parse_policy, policy_of
from tests.factories import AccountGroupFactory

CAREFUL = [
    {"check": "pii", "on": "input", "action": "redact", "restore": True},
    {"check": "secrets", "on": "both", "action": "block"},
    {"check": "injection", "on": "input", "action": "block"},
    {"check": "words", "on": "both", "action": "block", "words": ["ProjectX"]},
    {"check": "model", "on": "input", "action": "block", "model": "local/llama-guard", "fail": "closed", "timeout": 2},
    {"check": "webhook", "on": "both", "url": "https://guard.internal/check", "secret": "s3", "fail": "open",
     "timeout": 1},
]


def errors_of(raw) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(raw)
    return raised.value.messages


def test_the_issue_example_reads_with_its_defaults():
    policy = parse_policy(CAREFUL)
    pii, secrets, injection, words, model, webhook = policy.checks
    assert (pii.kind, pii.on, pii.action, pii.restore) == ("pii", "input", "redact", True)
    assert pii.entities == ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "IP_ADDRESS", "US_SSN",
                            "UK_NHS", "CRYPTO")
    assert secrets.on_input and secrets.on_output
    assert injection.threshold == 1.0
    assert words.words == ("ProjectX",)
    assert (model.model, model.style, model.fail, model.timeout) == ("local/llama-guard", "llama_guard", "closed", 2.0)
    assert (webhook.action, webhook.fail, webhook.timeout, webhook.secret) == ("block", "open", 1.0, "s3")
    assert policy.input_checks and policy.output_checks and policy.restores
    assert [c.kind for c in policy.on("output")] == ["secrets", "words", "webhook"]


def test_defaults_of_a_bare_item():
    (check,) = parse_policy([{"check": "secrets"}]).checks
    assert (check.on, check.action) == ("input", "block")
    (model,) = parse_policy([{"check": "model", "model": "small"}]).checks
    assert (model.style, model.fail, model.timeout) == ("classifier", "closed", 2.0)
    (hook,) = parse_policy([{"check": "webhook", "url": "http://127.0.0.1:9/x"}]).checks
    assert (hook.fail, hook.secret) == ("closed", "")
    assert not parse_policy([{"check": "secrets"}]).output_checks


def test_entities_narrowed_by_short_or_presidio_names():
    (check,) = parse_policy([{"check": "pii", "entities": ["email", "CREDIT_CARD", "Email"]}]).checks
    assert check.entities == ("EMAIL_ADDRESS", "CREDIT_CARD")


def test_errors_are_named_by_their_place():
    assert errors_of([{"check": "secrets"}, {"check": "pii"}, {"check": "pii", "action": "refuse"}]) == [
        "guardrails[2].action: must be one of block, redact, log"]
    assert errors_of("pii") == ["guardrails: must be a list of checks"]
    assert errors_of([["pii"]]) == ["guardrails[0]: must be a mapping such as {check: pii, on: input, action: redact}"]
    assert errors_of([{"check": "antivirus"}]) == [
        "guardrails[0].check: must be one of pii, secrets, injection, words, model, webhook"]
    assert errors_of([{"check": "injection", "action": "redact", "on": "output", "threshold": 0}]) == [
        "guardrails[0].action: must be one of block, log",
        "guardrails[0].threshold: must be a number above 0",
        "guardrails[0].on: an injection check reads the input only",
    ]
    assert errors_of([{"check": "pii", "on": "sideways", "entities": ["email", "dna"], "restore": "yes"}]) == [
        "guardrails[0].on: must be one of input, output, both",
        "guardrails[0].entities: unknown entity 'dna' (known: " + ", ".join(
            ["email", "phone", "card", "iban", "ip", "us_ssn", "us_itin", "us_passport", "uk_nhs", "uk_nino",
             "es_nif", "es_nie", "it_fiscal_code", "pl_pesel", "fi_personal_id", "in_aadhaar", "in_pan", "sg_nric",
             "au_tfn", "crypto", "mac"]) + ")",
        "guardrails[0].restore: must be true or false",
    ]
    assert errors_of([{"check": "pii", "action": "block", "restore": True}]) == [
        "guardrails[0].restore: only a redact on the input can be restored in the reply"]
    assert errors_of([{"check": "words"}, {"check": "words", "words": ["ok"], "patterns": ["(unclosed"]}]) == [
        "guardrails[0].words: a words check needs words or patterns",
        "guardrails[1].patterns[0]: not a regular expression (missing ), unterminated subpattern at position 0)",
    ]
    assert errors_of([{"check": "model", "timeout": 0, "fail": "maybe"}]) == [
        "guardrails[0].model: must name a model of the registry",
        "guardrails[0].fail: must be one of open, closed",
        "guardrails[0].timeout: must be a number of seconds above 0, at most 30",
    ]
    assert errors_of([{"check": "webhook", "url": "ftp://x", "secret_env": "GUARD_TEST_UNSET", "colour": 1}]) == [
        "guardrails[0].colour: not a key of a webhook check",
        "guardrails[0].url: must be an http:// or https:// address",
        "guardrails[0].secret_env: the variable GUARD_TEST_UNSET is not set",
    ]


def test_a_webhook_secret_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("GUARD_TEST_SECRET", "from-env")
    (hook,) = parse_policy([{"check": "webhook", "url": "https://g/x", "secret_env": "GUARD_TEST_SECRET"}]).checks
    assert hook.secret == "from-env"
    assert "from-env" not in repr(hook)


@pytest.mark.django_db
def test_policy_of_is_none_without_guardrails_and_kept_until_the_list_changes():
    group = AccountGroupFactory(name="careful")
    assert group.guardrails == [] and policy_of(group) is None
    group.guardrails = [{"check": "secrets"}]
    first = policy_of(group)
    assert policy_of(group) is first
    group.guardrails.append({"check": "words", "words": ["ProjectX"]})  # changed in place
    second = policy_of(group)
    assert [c.kind for c in second.checks] == ["secrets", "words"]
    group.save()
    group.refresh_from_db()
    assert policy_of(group) is second  # the same list read again
    group.guardrails = [{"check": "secrets", "on": "output"}]
    assert policy_of(group).checks[0].on == "output"


@pytest.mark.django_db
def test_a_stored_list_that_does_not_parse_refuses_every_call():
    group = AccountGroupFactory(name="broken", guardrails=[{"check": "pii", "action": "refuse"}])
    policy = policy_of(group)
    assert policy.errors == ("guardrails[0].action: must be one of block, redact, log",)
    assert policy.input_checks and policy.checks == ()
