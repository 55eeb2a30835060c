"""Aliases set by the operator: `applyconfig`'s `aliases` section and a group's
`allowed_aliases`, the admin's alias page and the group's aliases, and the registry's stamp
moving when any of them changes."""

import textwrap
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from accounts.models import AccountGroup
from gateway.models import Alias, AliasDeployment, AliasFallback
from gateway.registry.snapshot import read_stamps, registry
from gateway.state import loads
from tests.console_html import list_cells
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    AliasDeploymentFactory,
    AliasFactory,
    AliasFallbackFactory,
    ModelFactory,
    ModelServerFactory,
)

pytestmark = pytest.mark.django_db

FILE = """
servers:
  - name: gpu1
    base_url: http://127.0.0.1:9/v1
    models: [{name: llama}]
  - name: gpu2
    base_url: http://127.0.0.1:9/v1
    models: [{name: llama}]
  - name: cloud
    base_url: https://api.example.test/v1
    is_remote: true
    models: [{name: gpt}]
aliases:
  - name: team-llama
    policy: least-busy
    affinity: session
    deployments:
      - {model: gpu1/llama, weight: 3}
      - gpu2/llama
    fallbacks: [cloud/gpt]
groups:
  - name: interns
    api_access: true
    allowed_aliases: [team-llama]
    remote_servers_allowed: false
"""


@pytest.fixture
def apply(tmp_path):
    def run(text: str, *args) -> str:
        path = tmp_path / "gateway.yaml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        out = StringIO()
        call_command("applyconfig", str(path), *args, stdout=out)
        return out.getvalue()

    return run


@pytest.fixture
def admin_client(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    return client


def deployments(name):
    return list(AliasDeployment.objects.filter(alias__name=name).order_by("id")
                .values_list("model__server__name", "weight"))


def test_applyconfig_writes_an_alias_its_deployments_fallbacks_and_the_groups_that_may_use_it(apply):
    out = apply(FILE)
    assert "aliases: 1 created" in out and "groups: 1 created" in out
    alias = Alias.objects.get(name="team-llama")
    assert (alias.policy, alias.affinity, alias.enabled) == ("least-busy", "session", True)
    assert deployments("team-llama") == [("gpu1", 3), ("gpu2", 1)]
    assert list(alias.fallback_links.values_list("fallback__name", flat=True)) == ["gpt"]
    interns = AccountGroup.objects.get(name="interns")
    assert interns.all_models is False
    assert list(interns.allowed_aliases.values_list("name", flat=True)) == ["team-llama"]
    assert list(interns.allowed_models.all()) == []
    pool = registry().pools["team-llama"]
    assert (pool.policy, pool.affinity, [d.weight for d in pool.deployments]) == ("least-busy", "session", [3, 1])
    assert "aliases: 1 unchanged" in apply(FILE) and "Everything unchanged" in apply(FILE)


def test_applyconfig_makes_the_file_authoritative_for_the_alias(apply):
    apply(FILE)
    out = apply(FILE.replace("      - {model: gpu1/llama, weight: 3}\n", "")
                .replace("    policy: least-busy\n", "").replace("    fallbacks: [cloud/gpt]\n", ""))
    assert "aliases: 1 updated" in out
    alias = Alias.objects.get(name="team-llama")
    assert alias.policy == "weighted" and deployments("team-llama") == [("gpu2", 1)]
    assert not alias.fallback_links.exists()


@pytest.mark.parametrize("change, where, message", [
    ("    policy: least-busy\n", "aliases[0].policy", "bad policy 'fastest'"),
    ("    affinity: session\n", "aliases[0].affinity", "bad affinity 'sticky'"),
    ("      - gpu2/llama\n", "aliases[0].deployments[1].model", "unknown model gpu3/llama"),
    ("      - {model: gpu1/llama, weight: 3}\n", "aliases[0].deployments[0].weight", "at least 0"),
    ("    allowed_aliases: [team-llama]\n", "groups[0].allowed_aliases[0]", "unknown alias nope"),
    ("  - name: team-llama\n", "aliases[0].name", "names a model of the server 'gpu1'"),
])
def test_a_mistake_in_the_aliases_names_its_place_and_writes_nothing(apply, change, where, message):
    wrong = {"    policy: least-busy\n": "    policy: fastest\n",
             "    affinity: session\n": "    affinity: sticky\n",
             "      - gpu2/llama\n": "      - gpu3/llama\n",
             "      - {model: gpu1/llama, weight: 3}\n": "      - {model: gpu1/llama, weight: -1}\n",
             "    allowed_aliases: [team-llama]\n": "    allowed_aliases: [nope]\n",
             "  - name: team-llama\n": "  - name: gpu1/anything\n"}[change]
    with pytest.raises(CommandError) as exc:
        apply(FILE.replace(change, wrong))
    assert where in str(exc.value) and message in str(exc.value)
    assert not Alias.objects.exists() and not AccountGroup.objects.filter(name="interns").exists()


def test_an_alias_listed_twice_or_without_deployments_is_refused(apply):
    with pytest.raises(CommandError, match=r"aliases\[0\]: an alias needs deployments"):
        apply("aliases:\n  - name: empty\n")
    with pytest.raises(CommandError, match=r"aliases\[0\].deployments: an alias needs at least one deployment"):
        apply("aliases:\n  - {name: empty, deployments: []}\n")
    with pytest.raises(CommandError, match=r"aliases\[1\].name: alias 'team-llama' is listed twice"):
        apply(FILE.split("groups:")[0] + "  - {name: team-llama, deployments: [gpu1/llama]}\n")


@pytest.mark.parametrize("change", ["alias", "deployment", "deployment_delete", "fallback", "allowed_aliases",
                                    "allowed_aliases_reverse"])
def test_every_change_to_an_alias_moves_the_registry_stamp_once_committed(
        django_capture_on_commit_callbacks, change, redis_url):
    model = ModelFactory(server=ModelServerFactory(name="local"), name="m1")
    alias = AliasFactory(name="pool")
    deployment = AliasDeploymentFactory(alias=alias, model=model)
    group = AccountGroupFactory(name="team", all_models=False)
    before = read_stamps()[0]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        if change == "alias":
            alias.policy = "latency"
            alias.save()
        elif change == "deployment":
            AliasDeploymentFactory(alias=alias, model=ModelFactory(name="m2"))
        elif change == "deployment_delete":
            deployment.delete()
        elif change == "fallback":
            AliasFallbackFactory(alias=alias, fallback=model)
        elif change == "allowed_aliases":
            group.allowed_aliases.add(alias)
        elif change == "allowed_aliases_reverse":
            alias.groups.add(group)
    assert read_stamps()[0] == before
    for callback in callbacks:
        callback()
    assert read_stamps()[0] > before


def inline_forms(prefix, rows):
    data = {f"{prefix}-TOTAL_FORMS": str(len(rows)), f"{prefix}-INITIAL_FORMS": "0",
            f"{prefix}-MIN_NUM_FORMS": "0", f"{prefix}-MAX_NUM_FORMS": "1000"}
    for i, row in enumerate(rows):
        data.update({f"{prefix}-{i}-{name}": str(value) for name, value in row.items()})
    return data


def test_the_admin_adds_an_alias_with_its_deployments_and_fallbacks(admin_client):
    gpu1, gpu2 = (ModelFactory(server=ModelServerFactory(name=n), name="llama") for n in ("gpu1", "gpu2"))
    cloud = ModelFactory(server=ModelServerFactory(name="cloud", is_remote=True), name="gpt")
    response = admin_client.post(reverse("admin:gateway_alias_add"), {
        "name": "team-llama", "policy": "latency", "affinity": "user", "enabled": "on",
        **inline_forms("deployments", [{"model": gpu1.pk, "weight": 2}, {"model": gpu2.pk, "weight": 1}]),
        **inline_forms("fallback_links", [{"position": 0, "fallback": cloud.pk}]),
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    alias = Alias.objects.get(name="team-llama")
    assert (alias.policy, alias.affinity) == ("latency", "user")
    assert deployments("team-llama") == [("gpu1", 2), ("gpu2", 1)]
    assert list(AliasFallback.objects.filter(alias=alias).values_list("fallback__name", flat=True)) == ["gpt"]
    pool = registry().pools["team-llama"]
    assert [d.target.public_id for d in pool.deployments] == ["gpu1/llama", "gpu2/llama"]


def test_the_admin_refuses_an_alias_named_like_a_servers_model(admin_client):
    ModelServerFactory(name="gpu1")
    response = admin_client.post(reverse("admin:gateway_alias_add"), {
        "name": "gpu1/llama", "policy": "weighted", "affinity": "none", "enabled": "on",
        **inline_forms("deployments", []), **inline_forms("fallback_links", [])})
    assert response.status_code == 200
    assert "names a model of the server" in response.content.decode()
    assert not Alias.objects.exists()


def test_the_alias_page_shows_each_deployments_share_calls_in_flight_and_moving_latency(admin_client, redis_url):
    gpu1, gpu2 = (ModelFactory(server=ModelServerFactory(name=n), name="llama") for n in ("gpu1", "gpu2"))
    alias = AliasFactory(name="team-llama")
    AliasDeploymentFactory(alias=alias, model=gpu1, weight=3)
    AliasDeploymentFactory(alias=alias, model=gpu2, weight=1)
    for _ in range(3):
        loads.started(gpu1.pk)
        loads.first_byte(gpu1.pk, 0.040)
    loads.ended(gpu1.pk)
    loads.started(gpu2.pk)
    html = admin_client.get(reverse("admin:gateway_alias_change", args=[alias.pk])).content.decode()
    assert "<td>gpu1/llama</td><td>3</td><td>75 % (3)</td><td>2</td><td>40 ms</td>" in html
    assert "<td>gpu2/llama</td><td>1</td><td>25 % (1)</td><td>1</td><td>not measured</td>" in html
    listing = admin_client.get(reverse("admin:gateway_alias_changelist")).content.decode()
    assert list_cells(listing, "deployment_count") == ["2"]


def test_the_group_admin_sets_the_aliases_a_group_may_use(admin_client):
    alias = AliasFactory(name="team-llama")
    group = AccountGroupFactory(name="interns")
    url = reverse("admin:accounts_accountgroup_change", args=[group.pk])
    assert 'name="allowed_aliases"' in admin_client.get(url).content.decode()
    response = admin_client.post(url, {
        "name": "interns", "api_access": "on", "allowed_aliases": [alias.pk], "daily_tokens": -1,
        "weekly_tokens": -1, "monthly_tokens": -1, "daily_budget": -1, "weekly_budget": -1, "monthly_budget": -1,
        "remote_servers_allowed": "on", "attachments_per_message": 10, "response_cache_ttl": 0})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(AccountGroup.objects.get(pk=group.pk).allowed_aliases.all()) == [alias]
    assert registry().group_aliases[group.pk] == frozenset({alias.pk})
