"""Which models answer a request (DESIGN.md, Models): resolve the requested id, check the
group's limits, and build the chain — the requested model, its fallbacks, then the default.

Each process keeps the registry it read from the database, tagged with a version stamp held
with the counters (`gw:registry:v` in Redis, or the Django cache). Every change to a server, a
model, a fallback or a group's allowed models moves the stamp once it is committed (signals
below), and every `registry()` call knows the current stamp (with the stamp of the model servers'
cooldowns, see gateway/registry/cooldown.py): when it moved, the registry is read again. An API request
reads both in its atomic counter step (accounts/endpoints.py, `note_stamps`), so the hot path
pays no round trip for them; any other caller (a Celery task) reads them in one `MGET`.
So a change made in any process (admin, `applyconfig`, the API) is seen by every web and worker
process on its next call. REGISTRY_TTL_SECONDS stays as a backstop for changes made around the
signals (raw SQL, `QuerySet.update`) and for a stamp that could not be read or moved (Redis down).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.signals import request_finished
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from gateway.models import Model, ModelFallback, ModelServer
from gateway.registry import cooldown
from gateway.web.errors import ApiError

logger = logging.getLogger(__name__)

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
    drop_unsupported_fields: bool = False
    structured_output: str = "tool"


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
    server_ids: frozenset[int]
    default_id: int | None
    group_models: dict[int, frozenset[int]]  # group id → allowed model ids

    @property
    def default(self) -> Target | None:
        return self.by_id.get(self.default_id) if self.default_id else None


REGISTRY_STAMP_KEY = "registry:v"


def registry_version_key() -> str:
    """The counters' key (without their prefix) of the registry's version stamp."""
    return REGISTRY_STAMP_KEY


def stamp_keys() -> list[str]:
    """The counters' keys of the stamps `registry()` reads: a request's counter step may read
    them as guards expecting any value, and hand them over with `note_stamps`."""
    return [REGISTRY_STAMP_KEY, cooldown.STAMP_KEY]


# The stamps the current request read with its counter step (time.monotonic(), stamps). A
# request under ASGI has a context of its own, and the worker-thread hop of its checks hands its
# context back, so the note is the request's own; where a context outlives a request (a thread
# serving synchronous requests one after the other) it is dropped when the request finishes, and
# NOTED_STAMPS_SECONDS bounds it in any case.
_noted: contextvars.ContextVar[tuple[float, tuple[int, int]] | None] = contextvars.ContextVar(
    "gateway_registry_stamps", default=None)
NOTED_STAMPS_SECONDS = 1.0


def note_stamps(values) -> None:
    """The stamps (in `stamp_keys()` order) the request just read in its counter step: this
    request's `registry()` calls use them instead of reading them again."""
    _noted.set((time.monotonic(), (int(values[0]), int(values[1]))))


def _forget_noted_stamps(**_kwargs) -> None:
    _noted.set(None)


request_finished.connect(_forget_noted_stamps, dispatch_uid="registry-forget-noted-stamps")


@dataclass(frozen=True)
class _Snapshot:
    loaded_at: float  # time.monotonic()
    version: int | None  # the stamp read before loading; None: it could not be read
    registry: Registry


_lock = threading.Lock()
_cached: _Snapshot | None = None


def registry() -> Registry:
    """This process's registry, read again when the shared stamp moved or REGISTRY_TTL_SECONDS
    passed. The stamp is the one the request read with its counters (`note_stamps`), else it is
    read here (one round trip: Celery tasks, the console). Either way it was read before the
    database, so a change committed while loading moves the stamp past the version the load is
    tagged with, and is read on the next call."""
    global _cached
    noted = _noted.get()
    if noted is not None and time.monotonic() - noted[0] < NOTED_STAMPS_SECONDS:
        stamps = noted[1]
    else:
        stamps = read_stamps()
    version = stamps[0] if stamps is not None else None
    snapshot = _cached
    if not _fresh(snapshot, version):
        with _lock:
            snapshot = _cached
            if not _fresh(snapshot, version):
                snapshot = _Snapshot(time.monotonic(), version, _load())
                _cached = snapshot
    reg = snapshot.registry
    cooldown.sync(stamps[1] if stamps is not None else None, reg.server_ids)
    return reg


def registry_current() -> bool:
    """Whether `registry()` would answer from this process's copy, reading neither the database
    nor Redis: the request noted the stamps (`note_stamps`) and the copy and the cooldowns are of
    those stamps. An endpoint's step may then run in the event loop (accounts/endpoints.py)."""
    noted = _noted.get()
    if noted is None or time.monotonic() - noted[0] >= NOTED_STAMPS_SECONDS:
        return False
    return _fresh(_cached, noted[1][0]) and cooldown.current(noted[1][1])


def _fresh(snapshot: _Snapshot | None, version: int | None) -> bool:
    if snapshot is None or time.monotonic() - snapshot.loaded_at >= settings.REGISTRY_TTL_SECONDS:
        return False
    return version is None or version == snapshot.version


def read_stamps() -> tuple[int, int] | None:
    """(registry, cooldowns) version stamps, in one round trip; None when they cannot be read
    (the registry then lives by its TTL alone, and the cooldowns as this process knows them)."""
    from gateway.state import backend

    try:
        values = backend.current.read([REGISTRY_STAMP_KEY, cooldown.STAMP_KEY])
        return int(values[0] or 0), int(values[1] or 0)
    except cooldown.redis_errors() as exc:
        global _stamp_warned_at
        if time.monotonic() - _stamp_warned_at > STAMP_WARNING_SECONDS:  # once in a while, not per call
            _stamp_warned_at = time.monotonic()
            logger.warning("the registry's version stamp could not be read (the registry lives by its TTL "
                           "meanwhile): %s", exc)
        return None


STAMP_WARNING_SECONDS = 10.0
_stamp_warned_at = -STAMP_WARNING_SECONDS


def registry_invalidate(**_kwargs) -> None:
    """Forget this process's registry (it is read again on the next call). Other processes
    learn of a change through `registry_changed`."""
    global _cached
    _cached = None
    cooldown.reread()


def registry_changed(**_kwargs) -> None:
    """A change to what the registry holds: this process reads it again at once, every other
    process on its next call, once the change is committed (the stamp moves then; a process that
    read the registry before the commit is tagged with the old stamp)."""
    registry_invalidate()
    transaction.on_commit(_bump_stamp, robust=True)


def _bump_stamp() -> None:
    from gateway.state.counters import version_bump

    try:
        version_bump([REGISTRY_STAMP_KEY])
    except cooldown.redis_errors() as exc:
        logger.warning("the registry's version stamp could not be moved (other processes see the change "
                       "within REGISTRY_TTL_SECONDS): %s", exc)


def _load() -> Registry:
    servers = {
        s.id: Server(s.id, s.name, s.kind, s.base_url.rstrip("/"), s.api_key, s.is_remote, s.connect_timeout,
                     s.read_timeout, s.drop_unsupported_fields, s.structured_output)
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
        server_ids=frozenset(servers),
        default_id=default_id,
        group_models={g: frozenset(ids) for g, ids in group_models.items()},
    )


def _server_changed(sender, instance, **kwargs) -> None:
    """An operator changed a server (its address, key, timeouts): it gets a fresh chance."""
    registry_changed()
    transaction.on_commit(lambda: cooldown.clear(instance.pk), robust=True)


def _allowed_models_changed(sender, action, **kwargs) -> None:
    if action.startswith("post_"):
        registry_changed()


# Saved or deleted one by one (admin, applyconfig, the API). Deleting a group takes its allowed
# models' rows with it without a signal of their own. Bulk writes (`QuerySet.update`,
# `bulk_create`) send none: their callers call `registry_changed` themselves.
for _sender in (Model, ModelFallback, "accounts.AccountGroup"):
    post_save.connect(registry_changed, sender=_sender, dispatch_uid=f"registry-save-{_sender}")
    post_delete.connect(registry_changed, sender=_sender, dispatch_uid=f"registry-delete-{_sender}")
post_save.connect(_server_changed, sender=ModelServer, dispatch_uid="registry-save-server")
post_delete.connect(_server_changed, sender=ModelServer, dispatch_uid="registry-delete-server")
m2m_changed.connect(_allowed_models_changed, sender="accounts.AccountGroup_allowed_models",
                    dispatch_uid="registry-allowed-models")
m2m_changed.connect(_allowed_models_changed, sender=ModelFallback, dispatch_uid="registry-fallbacks")


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
