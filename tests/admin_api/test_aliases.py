"""/api/v1/admin/aliases: an alias with its weighted deployments (each through the console's deployment form)
and its ordered fallbacks."""

from auditlog.models import LogEntry

from gateway.models import Alias, AliasDeployment
from tests.factories import ModelFactory, ModelServerFactory


def test_create_read_change_and_delete_an_alias(api, staff, db):
    one, two, spare = ModelFactory(), ModelFactory(), ModelFactory()
    created = api.post("/aliases", {"name": "smart", "policy": "least-busy",
                                    "deployments": [{"model": one.pk, "weight": 3, "input_price": "0.5"},
                                                    {"model": two.pk}], "fallbacks": [spare.pk]})
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["name"], body["policy"], body["affinity"], body["enabled"], body["fallbacks"]) == (
        "smart", "least-busy", "none", True, [spare.pk])
    assert [(d["model"], d["weight"], d["input_price"]) for d in body["deployments"]] == [
        (one.pk, 3, "0.5"), (two.pk, 1, None)]
    alias_id = body["id"]
    assert api.get(f"/aliases/{alias_id}").json() == body
    changed = api.patch(f"/aliases/{alias_id}", {"enabled": False, "deployments": [{"model": two.pk, "weight": 0}]})
    assert changed.status_code == 200, changed.content
    assert (changed.json()["enabled"], changed.json()["fallbacks"]) == (False, [spare.pk])  # fallbacks kept
    assert [(d["model"], d["weight"]) for d in changed.json()["deployments"]] == [(two.pk, 0)]
    assert LogEntry.objects.get_for_object(Alias.objects.get(pk=alias_id)).latest("pk").actor_id == staff.pk
    assert api.delete(f"/aliases/{alias_id}").status_code == 204
    assert not AliasDeployment.objects.exists()


def test_refusals_name_the_deployment_and_its_field(api, db):
    model = ModelFactory()
    response = api.post("/aliases", {"name": "a", "deployments": [{"model": model.pk},
                                                                   {"model": model.pk, "weight": -1},
                                                                   {"model": 999999, "colour": "red"}]})
    assert response.status_code == 422
    assert response.json()["errors"] == {
        "deployments.1.weight": ["Ensure this value is greater than or equal to 0."],
        "deployments.2.colour": ["Unknown field."],
        "deployments.2.model": ["Select a valid choice. That choice is not one of the available choices."]}
    twice = api.post("/aliases", {"name": "a", "deployments": [{"model": model.pk}, {"model": model.pk}]})
    assert twice.json()["errors"] == {"deployments.1.model": ["This model is already a deployment of the alias."]}
    server = ModelServerFactory(name="local")
    clash = api.post("/aliases", {"name": f"{server.name}/x"})
    assert clash.json()["errors"] == {"name": ["'local/…' names a model of the server 'local'."]}
    assert api.post("/aliases", {"name": "b", "fallbacks": [999999]}).json()["errors"] == {
        "fallbacks": ["No model has the id 999999."]}
    assert not Alias.objects.exists()
