"""Which models answer a request (DESIGN.md, Models): resolve the requested id, check the
group's limits, and build the chain — the requested model, its fallbacks, then the default.

The registry is read from the database at most every REGISTRY_TTL_SECONDS per process and at
once after a change made in this process (signals below); other processes see a change within
that time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db.models.signals import m2m_changed, post_delete, post_save

from gateway.errors import ApiError
from gateway.models import Model, ModelFallback, ModelServer

CAPABILITIES = ("chat", "embeddings", "audio")


@dataclass(frozen=True)
class Server:
    id: int
    name: str
    kind: str
    base_url: str
    api_key: str
    is_remote: bool
    connect_timeout: float
    read_timeout: float


@dataclass(frozen=True)
class Target:
    id: int
    public_id: str
    name: str  # the name the server knows the model by
    server: Server
    capabilities: frozenset[str]
    fallback_ids: tuple[int, ...]
    created: int


@dataclass(frozen=True)
class Registry:
    by_id: dict[int, Target]
    by_public_id: dict[str, Target]
    by_name: dict[str, Target]  # bare upstream name → first model with it (by server name)
    server_names: frozenset[str]
    default_id: int | None
    group_models: dict[int, frozenset[int]]  # group id → allowed model ids

    @property
    def default(self) -> Target | None:
        return self.by_id.get(self.default_id) if self.default_id else None


_lock = threading.Lock()
_cached: tuple[float, Registry] | None = None


def registry() -> Registry:
    global _cached
    now = time.monotonic()
    snapshot = _cached
    if snapshot is not None and now - snapshot[0] < settings.REGISTRY_TTL_SECONDS:
        return snapshot[1]
    with _lock:
        fresh = _load()
        _cached = (now, fresh)
        return fresh


def registry_invalidate(**_kwargs) -> None:
    global _cached
    _cached = None


def _load() -> Registry:
    servers = {
        s.id: Server(s.id, s.name, s.kind, s.base_url.rstrip("/"), s.api_key, s.is_remote, s.connect_timeout,
                     s.read_timeout)
        for s in ModelServer.objects.filter(enabled=True)
    }
    fallbacks: dict[int, list[int]] = {}
    for link in ModelFallback.objects.order_by("position", "id"):
        fallbacks.setdefault(link.model_id, []).append(link.fallback_id)
    by_id, default_id = {}, None
    for m in Model.objects.filter(enabled=True, server_id__in=servers.keys()).order_by("server__name", "name"):
        server = servers[m.server_id]
        caps = frozenset(c for c in CAPABILITIES if getattr(m, f"supports_{c}"))
        by_id[m.id] = Target(m.id, f"{server.name}/{m.name}", m.name, server, caps, tuple(fallbacks.get(m.id, ())),
                             int(m.created_at.timestamp()))
        if m.is_default:
            default_id = m.id
    by_name: dict[str, Target] = {}
    for target in by_id.values():
        by_name.setdefault(target.name, target)
    group_models: dict[int, set[int]] = {}
    for group_id, model_id in Model.groups.through.objects.values_list("accountgroup_id", "model_id"):
        group_models.setdefault(group_id, set()).add(model_id)
    return Registry(
        by_id=by_id,
        by_public_id={t.public_id: t for t in by_id.values()},
        by_name=by_name,
        server_names=frozenset(s.name for s in servers.values()),
        default_id=default_id,
        group_models={g: frozenset(ids) for g, ids in group_models.items()},
    )


for _sender in (ModelServer, Model, ModelFallback):
    post_save.connect(registry_invalidate, sender=_sender, dispatch_uid=f"registry-save-{_sender.__name__}")
    post_delete.connect(registry_invalidate, sender=_sender, dispatch_uid=f"registry-delete-{_sender.__name__}")
m2m_changed.connect(registry_invalidate, dispatch_uid="registry-m2m")


def group_may_use(group, target: Target, reg: Registry) -> bool:
    if not group.all_models and target.id not in reg.group_models.get(group.id, frozenset()):
        return False
    return group.remote_servers_allowed or not target.server.is_remote


def usable_targets(group, *, capability: str | None = None) -> list[Target]:
    """The models a group may use (with `capability`, when given), ordered by id."""
    reg = registry()
    return sorted(
        (t for t in reg.by_id.values()
         if (capability is None or capability in t.capabilities) and group_may_use(group, t, reg)),
        key=lambda t: t.public_id,
    )


def resolve(model_id: str, reg: Registry) -> Target:
    """`server/model` must exist (else 404); a bare name no server has is answered by the default."""
    if not isinstance(model_id, str) or not model_id:
        raise ApiError(400, "The 'model' field is required.", code="invalid_request_error", param="model")
    server_name, sep, name = model_id.partition("/")
    if sep and server_name in reg.server_names:
        target = reg.by_public_id.get(model_id)
        if target is None:
            raise ApiError(404, f"The model '{model_id}' does not exist on server '{server_name}'.",
                           code="model_not_found", param="model")
        return target
    target = reg.by_name.get(model_id) or reg.default
    if target is None:
        raise ApiError(404, f"The model '{model_id}' does not exist.", code="model_not_found", param="model")
    return target


def plan_chain(model_id: str, *, group, capability: str = "chat") -> list[Target]:
    """The models to try in order. The requested one must be allowed to the group (403 otherwise);
    fallbacks and the default the group may not use are left out."""
    reg = registry()
    requested = resolve(model_id, reg)
    if capability not in requested.capabilities:
        raise ApiError(400, f"The model '{requested.public_id}' does not support {capability}.",
                       code="invalid_request_error", param="model")
    if not group.all_models and requested.id not in reg.group_models.get(group.id, frozenset()):
        raise ApiError(403, f"The model '{requested.public_id}' is not allowed for your account group.",
                       code="permission_denied", param="model")
    if requested.server.is_remote and not group.remote_servers_allowed:
        raise ApiError(403, f"Your account group may not use remote servers ('{requested.public_id}').",
                       code="permission_denied", param="model")
    chain, seen = [requested], {requested.id}
    extra_ids = [*requested.fallback_ids, *([reg.default_id] if reg.default_id else [])]
    for target_id in extra_ids:
        target = reg.by_id.get(target_id)
        if target is None or target.id in seen or capability not in target.capabilities:
            continue
        if group_may_use(group, target, reg):
            chain.append(target)
            seen.add(target.id)
    return chain
