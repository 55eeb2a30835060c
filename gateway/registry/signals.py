"""What moves the registry's stamp (gateway/registry/snapshot.py): a model, a fallback, an alias
(its deployments and fallbacks), a group's allowed models or aliases or a server saved or deleted,
once the change is committed. Connected once,
when the gateway app is ready (gateway/apps.py), never as a side effect of an import."""

from __future__ import annotations

from django.core.signals import request_finished
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from gateway.models import Alias, AliasDeployment, AliasFallback, Model, ModelFallback, ModelServer
from gateway.registry import cooldown, server_health
from gateway.registry.snapshot import forget_noted_stamps, registry_changed


def server_changed(sender, instance, **kwargs) -> None:
    """An operator changed a server (its address, key, timeouts): it gets a fresh chance."""
    registry_changed()
    transaction.on_commit(lambda: cooldown.clear(instance.pk), robust=True)
    server_health.forgive(instance.pk)  # this process's own record; a pool no longer avoids it


def server_moving(sender, instance, raw=False, **kwargs) -> None:
    """Before a server is saved: when its address or kind changes, what was seen of the old one is
    dropped from its health once the change is committed (server_health.address_changed)."""
    if raw or instance.pk is None:
        return
    before = ModelServer.objects.filter(pk=instance.pk).values("base_url", "kind").first()
    if before is not None and (before["base_url"] != instance.base_url or before["kind"] != instance.kind):
        pk = instance.pk
        transaction.on_commit(lambda: server_health.address_changed(pk), robust=True)


def allowed_models_changed(sender, action, **kwargs) -> None:
    if action.startswith("post_"):
        registry_changed()


def connect() -> None:
    """Saved or deleted one by one (admin, applyconfig, the API). Deleting a group takes its
    allowed models' rows with it without a signal of their own. Bulk writes (`QuerySet.update`,
    `bulk_create`) send none: their callers call `registry_changed` themselves."""
    for sender in (Model, ModelFallback, Alias, AliasDeployment, AliasFallback, "accounts.AccountGroup"):
        post_save.connect(registry_changed, sender=sender, dispatch_uid=f"registry-save-{sender}")
        post_delete.connect(registry_changed, sender=sender, dispatch_uid=f"registry-delete-{sender}")
    pre_save.connect(server_moving, sender=ModelServer, dispatch_uid="registry-server-moving")
    post_save.connect(server_changed, sender=ModelServer, dispatch_uid="registry-save-server")
    post_delete.connect(server_changed, sender=ModelServer, dispatch_uid="registry-delete-server")
    m2m_changed.connect(allowed_models_changed, sender="accounts.AccountGroup_allowed_models",
                        dispatch_uid="registry-allowed-models")
    m2m_changed.connect(allowed_models_changed, sender="accounts.AccountGroup_allowed_aliases",
                        dispatch_uid="registry-allowed-aliases")
    m2m_changed.connect(allowed_models_changed, sender=ModelFallback, dispatch_uid="registry-fallbacks")
    m2m_changed.connect(allowed_models_changed, sender=AliasFallback, dispatch_uid="registry-alias-fallbacks")
    request_finished.connect(forget_noted_stamps, dispatch_uid="registry-forget-noted-stamps")
