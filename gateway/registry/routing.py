"""Which models answer a request (DESIGN.md, Models): resolve the requested id against the
registry (gateway/registry/snapshot.py), check the group's limits, and build the chain — the
requested model, its fallbacks, then the default."""

from __future__ import annotations

from gateway.registry.snapshot import Registry, Target, registry
from gateway.web.errors import ApiError


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
