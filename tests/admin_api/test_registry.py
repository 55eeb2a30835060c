"""/api/v1/admin/servers and /api/v1/admin/models: the registry through the console's forms (ModelServer.clean
included); a server's secrets are write-only."""

from auditlog.models import LogEntry

from gateway.models import Model, ModelServer
from tests.factories import ModelFactory, ModelServerFactory


def test_create_read_change_and_delete_a_server_its_key_never_answered(api, db):
    created = api.post("/servers", {"name": "local", "base_url": "http://127.0.0.1:11434/v1", "api_key": "sk-abc"})
    assert created.status_code == 201, created.content
    body = created.json()
    assert "sk-abc" not in created.content.decode() and "api_key" not in body
    assert (body["name"], body["kind"], body["api_key_set"], body["aws_secret_access_key_set"]) == (
        "local", "openai", True, False)
    server_id = body["id"]
    assert api.get(f"/servers/{server_id}").json() == body
    kept = api.patch(f"/servers/{server_id}", {"read_timeout": 30})
    assert kept.status_code == 200, kept.content
    assert (kept.json()["read_timeout"], kept.json()["api_key_set"]) == (30.0, True)
    assert ModelServer.objects.get(pk=server_id).api_key == "sk-abc"
    assert api.patch(f"/servers/{server_id}", {"api_key": ""}).json()["api_key_set"] is False
    assert ModelServer.objects.get(pk=server_id).api_key == ""
    assert api.delete(f"/servers/{server_id}").status_code == 204
    assert api.get(f"/servers/{server_id}").status_code == 404


def test_what_the_console_refuses_the_api_refuses(api, db):
    bedrock = api.post("/servers", {"name": "aws", "kind": "bedrock"})
    assert bedrock.status_code == 422
    assert bedrock.json() == {"message": "An AWS Bedrock server needs its region.",
                              "errors": {"region": ["An AWS Bedrock server needs its region."]}}
    bad_url = api.post("/servers", {"name": "x", "base_url": "ftp://somewhere"})
    assert list(bad_url.json()["errors"]) == ["base_url"]
    assert api.post("/servers", {"name": "x", "base_url": "http://h/v1", "enabled": 1}).json()["errors"] == {
        "enabled": ["Must be true or false."]}
    assert not ModelServer.objects.exists()


def test_the_audit_trail_masks_the_key_and_names_the_actor(api, staff, db):
    server_id = api.post("/servers", {"name": "s", "base_url": "http://h/v1", "api_key": "sk-secret"}).json()["id"]
    entry = LogEntry.objects.get_for_object(ModelServer.objects.get(pk=server_id)).get()
    assert entry.actor_id == staff.pk
    assert "sk-secret" not in str(entry.changes)


def test_create_read_change_and_delete_a_model_with_prices(api, db):
    server = ModelServerFactory()
    created = api.post("/models", {"server": server.pk, "name": "llama3", "input_price": 0.15, "output_price": "0.6",
                                   "context_window": 32768})
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["public_id"], body["input_price"], body["output_price"], body["cached_input_price"]) == (
        f"{server.name}/llama3", "0.15", "0.6", None)
    assert body["is_default"] is True  # the first chat model becomes the default, as in the console
    model_id = body["id"]
    other = ModelFactory(server=server)
    changed = api.patch(f"/models/{model_id}", {"input_price": None, "fallbacks": [other.pk]}).json()
    assert (changed["input_price"], changed["output_price"], changed["fallbacks"]) == (None, "0.6", [other.pk])
    assert [row["id"] for row in api.get("/models", server=server.pk).json()["data"]] == [model_id, other.pk]
    assert api.patch(f"/models/{model_id}", {"output_price": -1}).json()["errors"] == {
        "output_price": ["Ensure this value is greater than or equal to 0."]}
    assert api.delete(f"/models/{model_id}").status_code == 204
    assert not Model.objects.filter(pk=model_id).exists()
