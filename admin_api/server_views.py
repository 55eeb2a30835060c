"""`/api/v1/admin/servers` and `/api/v1/admin/servers/{id}`: the model servers, through the console's server
form (gateway/admin.py `ModelServerForm`, which runs `ModelServer.clean`: what each kind needs).

Its secrets are write-only, as on the console's page: an API key, AWS's secret access key and session
token, and Entra ID's client secret are never answered, only whether each is set (`api_key_set`, ...). A
secret sent as text is stored; sent as "" or null it is removed; left out, the stored one is kept.
Saving here does not ask the server what it serves: model discovery is the console's (its action, and
on save), so that an API write never waits on a model server.
"""

from __future__ import annotations

from django.http import HttpResponse

from admin_api.access import admin_endpoint
from admin_api.bodies import check_types, read_fields
from admin_api.form_writes import deleted, found, saved
from admin_api.pages import paginate, query_parameters
from gateway.admin import ModelServerForm
from gateway.models import ModelServer
from gateway.web.output import respond

SECRETS = ModelServerForm.secret_fields
SERVER_FIELDS = tuple(name for name in ModelServerForm.base_fields if not name.startswith("clear_"))


def server_record(server: ModelServer) -> dict:
    return {
        "id": server.pk,
        **{name: getattr(server, name) for name in SERVER_FIELDS if name not in SECRETS},
        **{f"{name}_set": bool(getattr(server, name)) for name in SECRETS},
        "discovered_at": server.discovered_at,
        "discovery_error": server.discovery_error,
        "created_at": server.created_at,
    }


def _sent(request) -> dict:
    data = read_fields(request, SERVER_FIELDS)
    check_types(ModelServer, data)
    for name in SECRETS:
        if name in data and not data[name]:  # "" or null: removed (the page's "clear" box)
            data[name] = None
            data[f"clear_{name}"] = True
    return data


@admin_endpoint("GET", "gateway.view_modelserver")
def server_list(request):
    params = query_parameters(request)
    return respond(paginate(ModelServer.objects.all(), params, server_record).body())


@admin_endpoint("POST", "gateway.add_modelserver")
def server_create(request):
    server = saved(request, ModelServerForm, None, _sent(request))
    return respond(server_record(server), status=201)


@admin_endpoint("GET", "gateway.view_modelserver")
def server_detail(request, server_id: int):
    return respond(server_record(found(ModelServer, server_id, "server")))


@admin_endpoint("PATCH", "gateway.change_modelserver")
def server_update(request, server_id: int):
    server = saved(request, ModelServerForm, found(ModelServer, server_id, "server"), _sent(request))
    return respond(server_record(server))


@admin_endpoint("DELETE", "gateway.delete_modelserver")
def server_delete(request, server_id: int):
    """The server and its models (as in the console)."""
    deleted(request, found(ModelServer, server_id, "server"), "server")
    return HttpResponse(status=204)
