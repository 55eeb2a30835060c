"""Which models answer a request (docs/design.md, "Models"): resolve the requested id against the
registry (gateway/registry/snapshot.py), check the group's limits, and build the chain — the
requested model, its fallbacks, then the default. A name that names a pool (an alias, or a bare
name several servers hold) puts the pool's deployments first, in the order gateway/registry/pools.py
picks for this call, then the pool's fallbacks, then the default."""

from __future__ import annotations

from gateway.registry.pools import NO_KEYS, Affinity, order
from gateway.registry.snapshot import Pool, Registry, Target, registry
from gateway.telemetry import call_facts
from gateway.web.errors import ApiError


def group_may_use(group, target: Target, reg: Registry) -> bool:
    if not group.all_models and target.id not in reg.group_models.get(group.id, frozenset()):
        return False
    return group.remote_servers_allowed or not target.server.is_remote


def alias_allowed(group, pool: Pool, reg: Registry) -> bool:
    """An alias is allowed to a group as a model is: all models, or among the group's aliases."""
    return group.all_models or pool.alias_id in reg.group_aliases.get(group.id, frozenset())


def usable_targets(group, *, capability: str | None = None) -> list[Target]:
    """The models a group may use (with `capability`, when given), ordered by id."""
    reg = registry()
    return sorted(
        (t for t in reg.by_id.values()
         if (capability is None or capability in t.capabilities) and group_may_use(group, t, reg)),
        key=lambda t: t.public_id,
    )


def usable_aliases(group, *, capability: str | None = "chat", reg: Registry | None = None) -> list[Pool]:
    """The aliases a group may use, by name: allowed to it, with a deployment (of `capability`, unless
    None) it may reach (a group kept off remote servers needs a local one)."""
    reg = reg or registry()
    return [pool for pool in reg.aliases if alias_allowed(group, pool, reg)
            and any(_reachable(group, d.target, capability) for d in pool.deployments)]


def _reachable(group, target: Target, capability: str | None) -> bool:
    return ((capability is None or capability in target.capabilities)
            and (group.remote_servers_allowed or not target.server.is_remote))


def resolve(model_id: str, reg: Registry) -> Target | Pool:
    """`server/model` must exist (else 404); then an alias or a pool of that name; a bare name
    no server has is answered by the default."""
    if not isinstance(model_id, str) or not model_id:
        raise ApiError(400, "The 'model' field is required.", code="invalid_request_error", param="model")
    server_name, sep, name = model_id.partition("/")
    if sep and server_name in reg.server_names:
        target = reg.by_public_id.get(model_id)
        if target is None:
            raise ApiError(404, f"The model '{model_id}' does not exist on server '{server_name}'.",
                           code="model_not_found", param="model")
        return target
    pool = reg.pools.get(model_id)
    if pool is not None:
        return pool
    target = reg.by_name.get(model_id) or reg.default
    if target is None:
        raise ApiError(404, f"The model '{model_id}' does not exist.", code="model_not_found", param="model")
    return target


def plan_chain(model_id: str, *, group, capability: str = "chat", affinity: Affinity = NO_KEYS) -> list[Target]:
    """The models to try in order. The requested one must be allowed to the group (403 otherwise);
    fallbacks and the default the group may not use are left out. `affinity`: what ties this call
    to others (a pool with an affinity sends them to one deployment)."""
    call_facts.model_asked(model_id)  # for the calls log (an attribute write)
    reg = registry()
    requested = resolve(model_id, reg)
    if isinstance(requested, Pool):
        chain = pool_members(requested, reg, group=group, capability=capability, affinity=affinity)
        fallback_ids = requested.fallback_ids if requested.is_alias else [i for t in chain for i in t.fallback_ids]
        return _with_fallbacks(chain, fallback_ids, reg, group, capability)
    if capability not in requested.capabilities:
        raise ApiError(400, f"The model '{requested.public_id}' does not support {capability}.",
                       code="invalid_request_error", param="model")
    if not group.all_models and requested.id not in reg.group_models.get(group.id, frozenset()):
        raise ApiError(403, f"The model '{requested.public_id}' is not allowed for your account group.",
                       code="permission_denied", param="model")
    if requested.server.is_remote and not group.remote_servers_allowed:
        raise ApiError(403, f"Your account group may not use remote servers ('{requested.public_id}').",
                       code="permission_denied", param="model")
    return _with_fallbacks([requested], requested.fallback_ids, reg, group, capability)


def pool_members(pool: Pool, reg: Registry, *, group, capability: str, affinity: Affinity) -> list[Target]:
    """The pool's deployments the group may use, in the order this call tries them. An alias must
    be allowed to the group, a deployment of an implicit pool (a bare name) must be; neither ever
    sends a group kept off remote servers to a remote one. 403 when none is left, 400 when none
    has `capability`."""
    if pool.is_alias and not alias_allowed(group, pool, reg):
        raise ApiError(403, f"The model '{pool.name}' is not allowed for your account group.",
                       code="permission_denied", param="model")
    able = [d for d in pool.deployments if capability in d.target.capabilities]
    if not able:
        raise ApiError(400, f"The model '{pool.name}' does not support {capability}.",
                       code="invalid_request_error", param="model")
    if not pool.is_alias and not group.all_models:
        allowed = reg.group_models.get(group.id, frozenset())
        able = [d for d in able if d.target.id in allowed]
        if not able:
            raise ApiError(403, f"The model '{pool.name}' is not allowed for your account group.",
                           code="permission_denied", param="model")
    usable = able if group.remote_servers_allowed else [d for d in able if not d.target.server.is_remote]
    if not usable:
        raise ApiError(403, f"Your account group may not use remote servers ('{pool.name}').",
                       code="permission_denied", param="model")
    return order(pool, usable, affinity)


def _with_fallbacks(chain: list[Target], fallback_ids, reg: Registry, group, capability: str) -> list[Target]:
    """`chain`, then the fallbacks and the default it does not hold yet, those the group may use."""
    chain, seen = list(chain), {t.id for t in chain}
    for target_id in [*fallback_ids, *([reg.default_id] if reg.default_id else [])]:
        target = reg.by_id.get(target_id)
        if target is None or target.id in seen or capability not in target.capabilities:
            continue
        if group_may_use(group, target, reg):
            chain.append(target)
            seen.add(target.id)
    return chain
