"""Selectors over the model registry."""

from __future__ import annotations

from django.db.models import QuerySet

from gateway.models import Model


def models_usable_by(group) -> QuerySet[Model]:
    """Enabled models on enabled servers that a group may use: its allowed models (or all),
    and only local servers when the group may not use remote ones (spec 8.5)."""
    models = Model.objects.filter(enabled=True, server__enabled=True).select_related("server")
    if not group.all_models:
        models = models.filter(groups=group)
    if not group.remote_servers_allowed:
        models = models.filter(server__is_remote=False)
    return models.order_by("server__name", "name")
