"""`/api/v1/admin/aliases` and `/api/v1/admin/aliases/{id}`: a public model name over weighted deployments,
with its fallbacks, as the console's alias page writes them: the alias through the form the console's page
is made of (its four fields, and `Alias.clean`), each deployment through the console's deployment form
(gateway/admin.py `AliasDeploymentForm`: its model, weight, own prices and batch discount).

`deployments` and `fallbacks` (model ids, in order), when sent, replace the alias's own; left out, they
are kept. A deployment's error is named by its place: `deployments.1.weight`.
"""

from __future__ import annotations

from typing import Any

from django.forms import modelform_factory
from django.http import HttpResponse

from admin_api.access import admin_endpoint
from admin_api.account_records import money
from admin_api.bodies import UNKNOWN, check_types, is_id, read_fields
from admin_api.form_writes import deleted, form_data, found, saved
from admin_api.pages import paginate, query_parameters
from gateway.admin import AliasDeploymentForm
from gateway.console.fields.money import PRICE_FIELDS
from gateway.models import Alias, AliasDeployment, AliasFallback, Model
from gateway.web.errors import ValidationFailed
from gateway.web.output import respond

ALIAS_FIELDS = ("name", "policy", "affinity", "enabled")
AliasForm = modelform_factory(Alias, fields=ALIAS_FIELDS)
DEPLOYMENT_FIELDS = tuple(AliasDeploymentForm.base_fields)


def deployment_record(row: AliasDeployment) -> dict:
    return {"model": row.model_id, "weight": row.weight, **{name: money(getattr(row, name)) for name in PRICE_FIELDS},
            "batch_discount_percent": row.batch_discount_percent}


def alias_record(alias: Alias) -> dict:
    return {"id": alias.pk, **{name: getattr(alias, name) for name in ALIAS_FIELDS},
            "deployments": [deployment_record(row) for row in alias.deployments.all()],
            "fallbacks": [link.fallback_id for link in alias.fallback_links.all()], "created_at": alias.created_at}


def aliases_listed():
    return Alias.objects.prefetch_related("deployments", "fallback_links")


def _deployments(value: Any) -> list[AliasDeploymentForm]:
    """Each deployment checked by the console's form; a 422 naming every problem by its place."""
    if not isinstance(value, list):
        raise ValidationFailed({"deployments": ["Must be a list of deployments."]})
    forms, errors, models = [], {}, set()
    for index, item in enumerate(value):
        where = f"deployments.{index}"
        if not isinstance(item, dict):
            errors[where] = ["Must be an object."]
            continue
        errors.update({f"{where}.{name}": [UNKNOWN] for name in item if name not in DEPLOYMENT_FIELDS})
        try:
            check_types(AliasDeployment, item)
        except ValidationFailed as failed:
            errors.update({f"{where}.{name}": problems for name, problems in failed.errors.items()})
            continue
        form = AliasDeploymentForm(data=form_data(AliasDeploymentForm, None, item))
        if not form.is_valid():
            errors.update({f"{where}.{name}": [str(m) for m in problems] for name, problems in form.errors.items()})
        elif form.cleaned_data["model"].pk in models:
            errors[f"{where}.model"] = ["This model is already a deployment of the alias."]
        else:
            models.add(form.cleaned_data["model"].pk)
            forms.append(form)
    if errors:
        raise ValidationFailed(errors)
    return forms


def _fallbacks(value: Any) -> list[int]:
    if not isinstance(value, list) or not all(is_id(pk) for pk in value):
        raise ValidationFailed({"fallbacks": ["Must be a list of model ids."]})
    missing = sorted(set(value) - set(Model.objects.filter(pk__in=value).values_list("pk", flat=True)))
    if missing or len(set(value)) != len(value):
        problem = f"No model has the id {missing[0]}." if missing else "A model is listed twice."
        raise ValidationFailed({"fallbacks": [problem]})
    return value


def _write(request, alias: Alias | None) -> Alias:
    data = read_fields(request, (*ALIAS_FIELDS, "deployments", "fallbacks"))
    deployments = _deployments(data.pop("deployments")) if "deployments" in data else None
    fallbacks = _fallbacks(data.pop("fallbacks")) if "fallbacks" in data else None
    check_types(Alias, data)

    def parts(row: Alias) -> None:
        if deployments is not None:
            row.deployments.all().delete()
            for form in deployments:
                form.instance.alias = row
                form.save()
        if fallbacks is not None:
            row.fallback_links.all().delete()
            AliasFallback.objects.bulk_create(AliasFallback(alias=row, fallback_id=pk, position=index)
                                              for index, pk in enumerate(fallbacks))

    return saved(request, AliasForm, alias, data, after=parts)


@admin_endpoint("GET", "gateway.view_alias")
def alias_list(request):
    params = query_parameters(request)
    return respond(paginate(aliases_listed(), params, alias_record).body())


@admin_endpoint("POST", "gateway.add_alias")
def alias_create(request):
    alias = _write(request, None)
    return respond(alias_record(found(Alias, alias.pk, "alias", aliases_listed())), status=201)


@admin_endpoint("GET", "gateway.view_alias")
def alias_detail(request, alias_id: int):
    return respond(alias_record(found(Alias, alias_id, "alias", aliases_listed())))


@admin_endpoint("PATCH", "gateway.change_alias")
def alias_update(request, alias_id: int):
    _write(request, found(Alias, alias_id, "alias"))
    return respond(alias_record(found(Alias, alias_id, "alias", aliases_listed())))


@admin_endpoint("DELETE", "gateway.delete_alias")
def alias_delete(request, alias_id: int):
    deleted(request, found(Alias, alias_id, "alias"), "alias")
    return HttpResponse(status=204)
