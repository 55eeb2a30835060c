"""`/api/v1/admin/models` and `/api/v1/admin/models/{id}`: a server's models with their capabilities,
context window, prices per million tokens (exact decimal text in the installation's currency; null: no
price), batch discount and ordered fallbacks, through the console's model form (gateway/admin.py
`ModelForm`). As in the console, a chat model added or enabled while there is no default model becomes
the default (gateway/registry/default_model.py)."""

from __future__ import annotations

from django.http import HttpResponse

from admin_api.access import admin_endpoint
from admin_api.account_records import money
from admin_api.bodies import check_types, read_fields
from admin_api.filters import id_filter
from admin_api.form_writes import deleted, found, saved
from admin_api.pages import paginate, query_parameters
from gateway.admin import ModelForm
from gateway.console.fields.money import PRICE_FIELDS
from gateway.models import Model
from gateway.registry.default_model import choose_default
from gateway.web.output import respond

MODEL_FIELDS = tuple(name for name in ModelForm.base_fields if name != "unlisted_since")


def model_record(model: Model) -> dict:
    return {
        "id": model.pk,
        "public_id": model.public_id,
        **{name: getattr(model, name) for name in MODEL_FIELDS if name not in ("server", "fallbacks", *PRICE_FIELDS)},
        "server": model.server_id,
        **{name: money(getattr(model, name)) for name in PRICE_FIELDS},
        "fallbacks": [link.fallback_id for link in model.fallback_links.all()],
        "unlisted_since": model.unlisted_since,
        "created_at": model.created_at,
    }


def models_listed():
    return Model.objects.select_related("server").prefetch_related("fallback_links")


def _sent(request) -> dict:
    data = read_fields(request, MODEL_FIELDS)
    check_types(Model, data)
    return data


def _default_chosen(model: Model) -> None:
    choose_default([model])


@admin_endpoint("GET", "gateway.view_model")
def model_list(request):
    """Filter: `server` (its id)."""
    params = query_parameters(request, ("server",))
    rows = models_listed()
    if "server" in params:
        rows = rows.filter(server_id=id_filter(params, "server"))
    return respond(paginate(rows, params, model_record).body())


@admin_endpoint("POST", "gateway.add_model")
def model_create(request):
    model = saved(request, ModelForm, None, _sent(request), after=_default_chosen)
    return respond(model_record(found(Model, model.pk, "model", models_listed())), status=201)


@admin_endpoint("GET", "gateway.view_model")
def model_detail(request, model_id: int):
    return respond(model_record(found(Model, model_id, "model", models_listed())))


@admin_endpoint("PATCH", "gateway.change_model")
def model_update(request, model_id: int):
    data = _sent(request)
    chooses = {"enabled", "supports_chat"} & set(data)
    saved(request, ModelForm, found(Model, model_id, "model"), data, after=_default_chosen if chooses else None)
    return respond(model_record(found(Model, model_id, "model", models_listed())))


@admin_endpoint("DELETE", "gateway.delete_model")
def model_delete(request, model_id: int):
    deleted(request, found(Model, model_id, "model"), "model")
    return HttpResponse(status=204)
