"""The aliases a caller may chat with (native/profiles.py `aliases_for`): those allowed to
its group, with a deployment it may reach; available when one of them was listed at the last
discovery of its server, which did not fail."""

from django.utils import timezone

from accounts.models import AccountGroup
from gateway.models import Alias
from native.profiles import aliases_for
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    AliasDeploymentFactory,
    AliasFactory,
    ModelFactory,
    ModelServerFactory,
)


def test_it_lists_the_groups_aliases_with_their_policy_and_whether_they_can_answer(db):
    local = ModelFactory(server=ModelServerFactory(name="local"), name="llama")
    gone = ModelFactory(server=ModelServerFactory(name="old"), name="llama", unlisted_since=timezone.now())
    broken = ModelFactory(server=ModelServerFactory(name="broken", discovery_error="connect failed"), name="llama")
    cloud = ModelFactory(server=ModelServerFactory(name="cloud", is_remote=True), name="gpt")
    for name, models, policy in (("team", [local, gone], "latency"), ("stale", [gone, broken], "weighted"),
                                 ("remote", [cloud], "least-busy")):
        alias = AliasFactory(name=name, policy=policy)
        for model in models:
            AliasDeploymentFactory(alias=alias, model=model)
    everyone = AccountFactory(group=AccountGroupFactory(name="everyone"))
    assert aliases_for(account=everyone) == [
        {"name": "remote", "policy": "least-busy", "available": True},
        {"name": "stale", "policy": "weighted", "available": False},
        {"name": "team", "policy": "latency", "available": True},
    ]
    local_only = AccountFactory(group=AccountGroupFactory(name="local-only", remote_servers_allowed=False))
    assert [a["name"] for a in aliases_for(account=local_only)] == ["stale", "team"]
    narrow = AccountGroupFactory(name="narrow")
    AccountGroup.objects.filter(pk=narrow.pk).update(all_models=False)
    narrow.refresh_from_db()
    narrow.allowed_aliases.add(AliasFactory(name="none-deployed"), Alias.objects.get(name="team"))
    assert aliases_for(account=AccountFactory(group=narrow)) == [{"name": "team", "policy": "latency",
                                                                  "available": True}]


def test_the_profiles_endpoints_list_the_aliases_beside_the_profiles(client, db):
    from tests.factories import api_key_for

    alias = AliasFactory(name="team", policy="least-busy")
    AliasDeploymentFactory(alias=alias, model=ModelFactory(server=ModelServerFactory(name="local"), name="llama"))
    key = api_key_for(AccountFactory(group=AccountGroupFactory(name="everyone", api_access=True)))
    listed = client.get("/api/v1/profiles", headers={"Authorization": f"Bearer {key}"})
    assert listed.status_code == 200
    assert listed.json()["aliases"] == [{"name": "team", "policy": "least-busy", "available": True}]
