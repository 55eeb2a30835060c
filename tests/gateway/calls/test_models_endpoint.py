"""GET /v1/models: the models the caller may use, in the OpenAI list shape."""

from accounts.models import AccountGroup
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for, bearer


def ids(client, account):
    r = client.get("/v1/models", headers=bearer(api_key_for(account)))
    assert r.status_code == 200
    return [m["id"] for m in r.json()["data"]]


def test_it_lists_models_in_the_openai_shape(client, owner):
    model = ModelFactory(server=ModelServerFactory(name="local"), name="llama3:8b")
    r = client.get("/v1/models", headers=bearer(api_key_for(owner)))
    body = r.json()
    assert body["object"] == "list"
    assert body["data"] == [
        {"id": "local/llama3:8b", "object": "model", "created": int(model.created_at.timestamp()), "owned_by": "local"}
    ]
    assert r["X-RateLimit-Limit"] == "20"


def test_it_leaves_out_disabled_models_and_servers(client, owner):
    ModelFactory(name="on")
    ModelFactory(name="off", enabled=False)
    ModelFactory(name="server-off", server=ModelServerFactory(enabled=False))
    assert [i.split("/")[1] for i in ids(client, owner)] == ["on"]


def test_each_group_sees_only_its_allowed_models(client, owner, outsider):
    a, b = ModelFactory(name="a"), ModelFactory(name="b")
    AccountGroup.objects.filter(pk=owner.group_id).update(all_models=False)
    owner.group.allowed_models.add(a)
    assert ids(client, owner) == [a.public_id]
    assert sorted(ids(client, outsider)) == sorted([a.public_id, b.public_id])


def test_a_group_without_remote_servers_sees_only_local_ones(client, db):
    local = ModelFactory(server=ModelServerFactory(name="here", is_remote=False))
    ModelFactory(server=ModelServerFactory(name="cloud", is_remote=True))
    account = AccountFactory(group=AccountGroupFactory(remote_servers_allowed=False))
    assert ids(client, account) == [local.public_id]
