"""applyconfig: a group's `guardrails`, as the file writes them: stored as written, `on` read although YAML
takes it for a boolean, a webhook's secret read from `secret_env` when the file is applied (or kept), every
mistake named by its place, and the file authoritative (a group that leaves them out has none)."""

import textwrap
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import AccountGroup
from tests.factories import AccountGroupFactory

pytestmark = pytest.mark.django_db

# the issue's own example, as an operator would write it
CAREFUL = """
servers:
  - name: local
    kind: openai
    base_url: http://127.0.0.1:11434/v1
    models: [{name: llama-guard}]
groups:
  - name: careful
    guardrails:
      - {check: pii, on: input, action: redact, restore: true}   # entities: [email, card, ...] to narrow
      - {check: secrets, on: both, action: block}
      - {check: injection, on: input, action: block}
      - {check: words, on: both, action: block, words: [ProjectX]}
      - {check: model, on: input, action: block, model: local/llama-guard, fail: closed, timeout: 2}
      - {check: webhook, on: both, url: "https://guard.internal/check", secret_env: GUARD_SECRET, fail: open,
         timeout: 1}
"""
STORED = [
    {"check": "pii", "on": "input", "action": "redact", "restore": True},
    {"check": "secrets", "on": "both", "action": "block"},
    {"check": "injection", "on": "input", "action": "block"},
    {"check": "words", "on": "both", "action": "block", "words": ["ProjectX"]},
    {"check": "model", "on": "input", "action": "block", "model": "local/llama-guard", "fail": "closed", "timeout": 2},
    {"check": "webhook", "on": "both", "url": "https://guard.internal/check", "fail": "open", "timeout": 1,
     "secret": "s3cret-from-env"},
]


@pytest.fixture
def apply(tmp_path):
    def run(text: str) -> str:
        path = tmp_path / "gateway.yaml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        out = StringIO()
        call_command("applyconfig", str(path), stdout=out)
        return out.getvalue()

    return run


def guardrails(name: str = "careful") -> list:
    return AccountGroup.objects.get(name=name).guardrails


def test_the_issues_example_is_stored_with_the_secret_read_from_the_environment(apply, monkeypatch):
    monkeypatch.setenv("GUARD_SECRET", "s3cret-from-env")

    assert "groups: 1 created" in apply(CAREFUL)

    assert guardrails() == STORED
    assert "Everything unchanged" in apply(CAREFUL)
    monkeypatch.setenv("GUARD_SECRET", "rotated")
    assert "groups: 1 updated" in apply(CAREFUL)
    assert guardrails()[5]["secret"] == "rotated"


def test_a_group_that_leaves_them_out_has_none(apply, monkeypatch):
    """The file is authoritative for the groups it names, as for their other keys."""
    monkeypatch.setenv("GUARD_SECRET", "s3cret-from-env")
    apply(CAREFUL)

    assert "groups: 1 updated" in apply("groups: [{name: careful}]")

    assert guardrails() == []


def test_a_webhook_without_a_secret_keeps_the_one_stored_for_its_url_and_an_empty_one_clears_it(apply):
    AccountGroupFactory(name="careful", guardrails=[
        {"check": "webhook", "url": "https://guard.internal/check", "secret": "typed-in-the-admin"}])
    hook = '{check: webhook, on: both, url: "https://guard.internal/%s"%s}'

    apply(f"groups: [{{name: careful, guardrails: [{hook % ('check', '')}]}}]")
    assert guardrails() == [{"check": "webhook", "on": "both", "url": "https://guard.internal/check",
                             "secret": "typed-in-the-admin"}]

    apply(f"groups: [{{name: careful, guardrails: [{hook % ('other', '')}]}}]")  # another guard: not its secret
    assert guardrails() == [{"check": "webhook", "on": "both", "url": "https://guard.internal/other"}]

    AccountGroup.objects.filter(name="careful").update(guardrails=[
        {"check": "webhook", "url": "https://guard.internal/check", "secret": "typed-in-the-admin"}])
    cleared = hook % ("check", ', secret: ""')
    apply(f"groups: [{{name: careful, guardrails: [{cleared}]}}]")
    assert guardrails() == [{"check": "webhook", "on": "both", "url": "https://guard.internal/check"}]


@pytest.mark.parametrize("items, message", [
    ("[{check: injection, on: input, action: redact}]",
     "groups[0].guardrails[0].action: must be one of block, log"),
    ("[{check: secrets}, {check: pii, on: sideways}]",
     "groups[0].guardrails[1].on: must be one of input, output, both"),
    ("[{check: colours}]", "groups[0].guardrails[0].check: must be one of pii, secrets, injection, words, model, "
                           "webhook"),
    ("[{check: words, words: [a], colour: red}]", "groups[0].guardrails[0].colour: not a key of a words check"),
    ("[secrets]", "groups[0].guardrails[0]: must be a mapping"),
    ("{check: secrets}", "groups[0].guardrails: must be a list"),
    ("[{check: webhook, url: 'https://g.test/', secret_env: GUARD_SECRET}]",
     "groups[0].guardrails[0].secret_env: environment variable GUARD_SECRET is not set"),
    ("[{check: webhook, url: 'https://g.test/', secret: a, secret_env: GUARD_SECRET}]",
     "groups[0].guardrails[0].secret_env: give secret or secret_env, not both"),
    ("[{check: pii, secret_env: GUARD_SECRET}]", "groups[0].guardrails[0].secret_env: only for a webhook check"),
    ("[{check: secrets, on: input, 'on': output}]", "groups[0].guardrails[0].on: given twice"),
    ("[{check: secrets}, {check: model, model: nowhere/guard}]",
     "groups[0].guardrails[1].model: unknown model nowhere/guard (write it as server/model, a model's name or an "
     "alias's)"),
])
def test_a_mistake_is_named_by_its_place_and_writes_nothing(apply, monkeypatch, items, message):
    monkeypatch.delenv("GUARD_SECRET", raising=False)
    AccountGroupFactory(name="careful", guardrails=[{"check": "secrets"}])

    with pytest.raises(CommandError) as refused:
        apply(f"groups: [{{name: careful, daily_tokens: 5, guardrails: {items}}}]")

    assert message in str(refused.value)
    group = AccountGroup.objects.get(name="careful")
    assert (group.guardrails, group.daily_tokens) == ([{"check": "secrets"}], -1)


def test_a_model_check_may_name_a_model_by_its_bare_name_or_one_the_file_creates(apply):
    apply("""
    servers: [{name: guards, kind: openai, base_url: "http://127.0.0.1:9/v1", models: [{name: shield-1}]}]
    groups: [{name: careful, guardrails: [{check: model, model: shield-1}, {check: model, model: guards/shield-1}]}]
    """)
    assert [item["model"] for item in guardrails()] == ["shield-1", "guards/shield-1"]
