"""manage.py applyconfig FILE: the operator's YAML file, applied idempotently in one transaction."""

import textwrap
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import AccountGroup
from gateway.models import AliasDeployment, Model, ModelFallback, ModelServer
from tests.factories import AccountGroupFactory, ModelFactory, ModelServerFactory

pytestmark = pytest.mark.django_db

SAMPLE = """
servers:
  - name: local
    kind: openai
    base_url: http://127.0.0.1:11434/v1
    models:
      - name: llama3.1:8b
        fallbacks: [cloud/gpt-4o-mini]
      - name: nomic-embed-text
        chat: false
        embeddings: true
  - name: cloud
    kind: openai
    base_url: https://api.openai.com/v1
    api_key_env: OPENAI_API_KEY
    is_remote: true
    read_timeout: 60
    models: [{name: gpt-4o-mini}]
default_model: local/llama3.1:8b
groups:
  - name: staff
    api_access: true
    daily_tokens: 200000
  - name: interns
    api_access: true
    allowed_models: [local/llama3.1:8b]
    remote_servers_allowed: false
"""


@pytest.fixture(autouse=True)
def _openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")


@pytest.fixture
def apply(tmp_path):
    def run(text: str, *args) -> str:
        path = tmp_path / "gateway.yaml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        out = StringIO()
        call_command("applyconfig", str(path), *args, stdout=out)
        return out.getvalue()

    return run


def snapshot():
    """Everything applyconfig may write, to show that a refused file wrote nothing."""
    return (
        list(ModelServer.objects.order_by("name").values()),
        list(Model.objects.order_by("server__name", "name").values()),
        list(ModelFallback.objects.order_by("model_id", "position").values("model_id", "fallback_id", "position")),
        list(AccountGroup.objects.order_by("name").values()),
        sorted(AccountGroup.allowed_models.through.objects.values_list("accountgroup_id", "model_id")),
    )


def model(public_id: str) -> Model:
    server, _, name = public_id.partition("/")
    return Model.objects.get(server__name=server, name=name)


def test_creates_everything(apply):
    out = apply(SAMPLE)

    local, cloud = ModelServer.objects.get(name="local"), ModelServer.objects.get(name="cloud")
    assert (local.kind, local.base_url, local.api_key, local.is_remote, local.enabled) == (
        "openai", "http://127.0.0.1:11434/v1", "", False, True)
    assert (local.connect_timeout, local.read_timeout) == (5.0, 120.0)
    assert (cloud.api_key, cloud.is_remote, cloud.read_timeout) == ("sk-test-123", True, 60.0)

    llama, embed, mini = model("local/llama3.1:8b"), model("local/nomic-embed-text"), model("cloud/gpt-4o-mini")
    assert (llama.supports_chat, llama.supports_embeddings, llama.is_default) == (True, False, True)
    assert (embed.supports_chat, embed.supports_embeddings, embed.is_default) == (False, True, False)
    assert list(llama.fallbacks.all()) == [mini]

    staff, interns = AccountGroup.objects.get(name="staff"), AccountGroup.objects.get(name="interns")
    assert (staff.api_access, staff.all_models, staff.daily_tokens, staff.weekly_tokens) == (True, True, 200000, -1)
    assert (interns.all_models, interns.remote_servers_allowed) == (False, False)
    assert list(interns.allowed_models.all()) == [llama]

    assert "servers: 2 created" in out
    assert "models: 3 created" in out
    assert "groups: 2 created" in out
    assert "default model: local/llama3.1:8b (set)" in out
    assert "sk-test-123" not in out


def test_second_run_changes_nothing(apply):
    apply(SAMPLE)
    before = snapshot()

    out = apply(SAMPLE)

    assert snapshot() == before
    assert "servers: 2 unchanged" in out
    assert "models: 3 unchanged" in out
    assert "groups: 2 unchanged" in out
    assert "default model: local/llama3.1:8b (unchanged)" in out
    assert "Everything unchanged" in out
    assert "created" not in out and "updated" not in out


def test_updates_in_place(apply):
    apply(SAMPLE)
    ids = snapshot()
    changed = (SAMPLE
               .replace("base_url: http://127.0.0.1:11434/v1", "base_url: http://127.0.0.1:8000/v1\n    enabled: false")
               .replace("daily_tokens: 200000", "daily_tokens: 5000")
               .replace("        fallbacks: [cloud/gpt-4o-mini]\n",
                        "        audio: true\n        context_window: 131072\n"))

    out = apply(changed)

    local = ModelServer.objects.get(name="local")
    assert (local.pk, local.base_url, local.enabled) == (ids[0][1]["id"], "http://127.0.0.1:8000/v1", False)
    llama = model("local/llama3.1:8b")
    assert llama.supports_audio is True and llama.context_window == 131072
    assert list(llama.fallbacks.all()) == []  # left out of the file: none
    assert AccountGroup.objects.get(name="staff").daily_tokens == 5000
    assert ModelServer.objects.count() == 2 and Model.objects.count() == 3 and AccountGroup.objects.count() == 2
    assert "servers: 1 updated, 1 unchanged" in out
    assert "models: 1 updated, 2 unchanged" in out
    assert "groups: 1 updated, 1 unchanged" in out


def test_fallbacks_keep_their_order(apply):
    apply(SAMPLE)
    apply(SAMPLE.replace("fallbacks: [cloud/gpt-4o-mini]", "fallbacks: [local/nomic-embed-text, cloud/gpt-4o-mini]"))
    links = ModelFallback.objects.filter(model=model("local/llama3.1:8b")).order_by("position")
    assert [link.fallback.public_id for link in links] == ["local/nomic-embed-text", "cloud/gpt-4o-mini"]

    swapped = "fallbacks: [cloud/gpt-4o-mini, local/nomic-embed-text]"
    out = apply(SAMPLE.replace("fallbacks: [cloud/gpt-4o-mini]", swapped))
    links = ModelFallback.objects.filter(model=model("local/llama3.1:8b")).order_by("position")
    assert [link.fallback.public_id for link in links] == ["cloud/gpt-4o-mini", "local/nomic-embed-text"]
    assert "models: 1 updated, 2 unchanged" in out


def test_a_groups_file_storage_quota_is_set_by_the_file_and_its_default_otherwise(apply):
    apply(SAMPLE.replace("    daily_tokens: 200000\n", "    daily_tokens: 200000\n    file_storage_bytes: -1\n"))
    staff, interns = AccountGroup.objects.get(name="staff"), AccountGroup.objects.get(name="interns")
    assert (staff.file_storage_bytes, interns.file_storage_bytes) == (-1, 10 * 1024 ** 3)

    with pytest.raises(CommandError, match="file_storage_bytes"):
        apply(SAMPLE.replace("    daily_tokens: 200000\n", "    daily_tokens: 200000\n    file_storage_bytes: -2\n"))


def test_things_not_in_the_file_are_left_alone(apply):
    other = ModelFactory(server=ModelServerFactory(name="other"), name="keep-me")
    AccountGroupFactory(name="default", daily_tokens=7)

    apply(SAMPLE)

    assert Model.objects.filter(pk=other.pk).exists()
    assert AccountGroup.objects.get(name="default").daily_tokens == 7


def test_references_may_name_models_already_in_the_database(apply):
    ModelFactory(server=ModelServerFactory(name="other"), name="spare")
    apply(SAMPLE.replace("fallbacks: [cloud/gpt-4o-mini]", "fallbacks: [other/spare]"))
    assert [m.public_id for m in model("local/llama3.1:8b").fallbacks.all()] == ["other/spare"]


def test_api_key_from_the_environment(apply, monkeypatch):
    apply(SAMPLE)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-rotated")

    out = apply(SAMPLE)

    assert ModelServer.objects.get(name="cloud").api_key == "sk-rotated"
    assert "servers: 1 updated, 1 unchanged" in out


def test_api_key_is_kept_when_the_file_gives_none(apply):
    apply(SAMPLE)
    ModelServer.objects.filter(name="local").update(api_key="typed-in-the-admin")
    apply(SAMPLE)
    assert ModelServer.objects.get(name="local").api_key == "typed-in-the-admin"

    apply(SAMPLE.replace("    kind: openai\n    base_url: http://127.0.0.1:11434/v1",
                         "    kind: openai\n    base_url: http://127.0.0.1:11434/v1\n    api_key: ''"))
    assert ModelServer.objects.get(name="local").api_key == ""


def test_default_model_switches(apply):
    apply(SAMPLE)
    out = apply(SAMPLE.replace("default_model: local/llama3.1:8b", "default_model: cloud/gpt-4o-mini"))

    assert [m.public_id for m in Model.objects.filter(is_default=True)] == ["cloud/gpt-4o-mini"]
    assert "default model: cloud/gpt-4o-mini (set)" in out


def test_default_model_left_out_keeps_the_current_one(apply):
    apply(SAMPLE)
    apply(SAMPLE.replace("default_model: local/llama3.1:8b\n", ""))
    assert model("local/llama3.1:8b").is_default


def test_allowed_models_turn_all_models_off_and_back(apply):
    group = AccountGroupFactory(name="interns", all_models=True)
    apply(SAMPLE)
    group.refresh_from_db()
    assert group.all_models is False
    assert [m.public_id for m in group.allowed_models.all()] == ["local/llama3.1:8b"]

    apply(SAMPLE.replace("    allowed_models: [local/llama3.1:8b]\n", ""))
    group.refresh_from_db()
    assert group.all_models is True
    assert group.allowed_models.count() == 0

    apply(SAMPLE.replace("allowed_models: [local/llama3.1:8b]", "allowed_models: []"))
    group.refresh_from_db()
    assert group.all_models is False and group.allowed_models.count() == 0  # no model at all


def test_dry_run_writes_nothing(apply):
    out = apply(SAMPLE, "--dry-run")
    assert "servers: 2 created" in out and "Dry run" in out
    assert ModelServer.objects.count() == 0 and AccountGroup.objects.count() == 0


def test_an_empty_file_changes_nothing(apply):
    out = apply("")
    assert "Everything unchanged" in out


BAD = [
    ("prune: true\n" + SAMPLE, "prune: unknown key"),
    (SAMPLE.replace("    is_remote: true", "    is_remote: true\n    colour: blue"), "servers[1].colour: unknown key"),
    (SAMPLE.replace("kind: openai\n    base_url: https://api", "kind: palm\n    base_url: https://api"),
     "servers[1].kind: bad kind 'palm'"),
    (SAMPLE.replace("fallbacks: [cloud/gpt-4o-mini]", "fallbacks: [cloud/x]"),
     "servers[0].models[0].fallbacks[0]: unknown model cloud/x"),
    (SAMPLE.replace("fallbacks: [cloud/gpt-4o-mini]", "fallbacks: [local/llama3.1:8b]"),
     "servers[0].models[0].fallbacks[0]: a model cannot fall back to itself"),
    (SAMPLE.replace("default_model: local/llama3.1:8b", "default_model: local/nope"),
     "default_model: unknown model local/nope"),
    (SAMPLE.replace("allowed_models: [local/llama3.1:8b]", "allowed_models: [gpt-4o-mini]"),
     "groups[1].allowed_models[0]: unknown model gpt-4o-mini"),
    (SAMPLE.replace("api_key_env: OPENAI_API_KEY", "api_key_env: NO_SUCH_VARIABLE_FOR_TESTS"),
     "servers[1].api_key_env: environment variable NO_SUCH_VARIABLE_FOR_TESTS is not set"),
    (SAMPLE.replace("daily_tokens: 200000", "daily_tokens: lots"), "groups[0].daily_tokens: must be a whole number"),
    (SAMPLE.replace("daily_tokens: 200000", "daily_tokens: -2"), "groups[0].daily_tokens: must be a whole number"),
    (SAMPLE.replace("is_remote: true", "is_remote: maybe"), "servers[1].is_remote: must be true or false"),
    (SAMPLE.replace("fallbacks: [cloud/gpt-4o-mini]", "context_window: 255"),
     "servers[0].models[0].context_window: must be a whole number of at least 256"),
    (SAMPLE.replace("read_timeout: 60", "read_timeout: 0"), "servers[1].read_timeout: Ensure this value"),
    (SAMPLE.replace("base_url: https://api.openai.com/v1", "base_url: not a url"),
     "servers[1].base_url: Enter a valid"),
    (SAMPLE.replace("  - name: cloud", "  - name: local"), "servers[1].name: server 'local' is listed twice"),
    (SAMPLE.replace("  - name: cloud", "  - name: Cloud Server"), "servers[1].name:"),
    (SAMPLE.replace("- name: staff", "- name: staff\n    name: again"),
     "line 22, column 5: invalid YAML: key 'name' given twice"),
    (SAMPLE.replace("models: [{name: gpt-4o-mini}]", "models: [{name: gpt-4o-mini]"), "invalid YAML"),
    ("- just\n- a list\n", "the file must be a mapping"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_errors_name_their_place_and_write_nothing(apply, tmp_path, text, message):
    apply(SAMPLE.replace("daily_tokens: 200000", "daily_tokens: 1"))  # something there already
    before = snapshot()

    with pytest.raises(CommandError) as caught:
        apply(text)

    assert str(caught.value).startswith(f"{tmp_path / 'gateway.yaml'}: ")
    assert message in str(caught.value)
    assert snapshot() == before


def test_a_late_error_rolls_back_what_came_before(apply):
    with pytest.raises(CommandError, match=r"groups\[1\]\.allowed_models\[0\]: unknown model"):
        apply(SAMPLE.replace("allowed_models: [local/llama3.1:8b]", "allowed_models: [local/missing]"))
    assert ModelServer.objects.count() == 0 and Model.objects.count() == 0 and AccountGroup.objects.count() == 0


def test_a_missing_file(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("applyconfig", str(tmp_path / "nope.yaml"))


def test_the_documented_example_applies(apply, monkeypatch):
    """docs/configuration.md's full example is a valid file."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text(encoding="utf-8")
    example = doc.split("### A full example", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    out = apply(example)

    assert "servers: 4 created" in out and "models: 5 created" in out and "groups: 3 created" in out
    assert ModelServer.objects.get(name="claude").kind == "anthropic"
    assert ModelServer.objects.get(name="old-vllm").enabled is False
    mini = model("cloud/gpt-4o-mini")
    assert (mini.input_price, mini.cached_input_price, mini.output_price) == (
        Decimal("0.15"), Decimal("0.075"), Decimal("0.6"))
    assert model("local/llama3.1:8b").input_price is None
    claude = model("claude/claude-sonnet-4-5")
    assert (claude.input_price, claude.cache_write_price, mini.cache_write_price) == (
        Decimal("3"), Decimal("3.75"), None)
    assert AliasDeployment.objects.get(model__name="claude-sonnet-4-5").input_price == Decimal("2.5")
    interns = AccountGroup.objects.get(name="interns")
    assert (interns.daily_budget, interns.weekly_budget, interns.monthly_budget) == (
        Decimal("2"), Decimal("7.5"), Decimal("-1"))
    assert "Everything unchanged" in apply(example)


def test_a_servers_translation_choices_are_set_and_default(apply):
    """How a translated request treats a field the server's format cannot carry, and how
    response_format reaches an Anthropic server: off and `tool` unless the file says."""
    apply(SAMPLE.replace("    is_remote: true\n", "    is_remote: true\n    drop_unsupported_fields: true\n"
                                                    "    structured_output: output_config\n"))
    cloud, local = ModelServer.objects.get(name="cloud"), ModelServer.objects.get(name="local")
    assert (cloud.drop_unsupported_fields, cloud.structured_output) == (True, "output_config")
    assert (local.drop_unsupported_fields, local.structured_output) == (False, "tool")


@pytest.mark.parametrize("line, message", [
    ("structured_output: json", "servers[1].structured_output: bad structured_output 'json'; expected one of tool, "
                                "output_config"),
    ("drop_unsupported_fields: sometimes", "servers[1].drop_unsupported_fields"),
])
def test_a_bad_translation_choice_is_refused_by_name(apply, line, message):
    with pytest.raises(CommandError) as caught:
        apply(SAMPLE.replace("    is_remote: true\n", f"    is_remote: true\n    {line}\n"))
    assert message in str(caught.value)
    assert ModelServer.objects.count() == 0


def test_a_groups_response_cache_ttl_is_set_and_off_by_default(apply):
    apply(SAMPLE.replace("    daily_tokens: 200000\n", "    daily_tokens: 200000\n    response_cache_ttl: 600\n"))
    assert AccountGroup.objects.get(name="staff").response_cache_ttl == 600
    assert AccountGroup.objects.get(name="interns").response_cache_ttl == 0
