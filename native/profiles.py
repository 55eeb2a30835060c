"""Profiles a caller may use (docs/design.md, "Profiles"; docs/decisions/0036-profiles.md), and the
aliases it may chat with (`aliases_for`).

A profile is listed to the members of the groups it is granted to, while it is enabled. Its
`available` says whether its model (or the default model, when the profile names none) can
answer a member now, judged from what the gateway knows without calling any server: the model
is in the registry (enabled, on an enabled server), takes chat, is allowed to the group, its
server listed it at the last discovery, and that discovery did not fail.
"""

from __future__ import annotations

from typing import Any

from gateway.models import Model
from gateway.registry.discovery import discover_models
from gateway.registry.routing import group_may_use, usable_aliases
from gateway.registry.snapshot import Registry, registry
from native.models import Profile


def profiles_for(*, account) -> list[dict[str, Any]]:
    """The caller's enabled profiles, by name, in the shape of `GET /api/v1/profiles`."""
    group = account.group
    rows = list(Profile.objects.filter(enabled=True, groups=group.pk).select_related("model__server").order_by("name"))
    collections: dict[int, list[int]] = {}
    links = Profile.collections.through.objects.filter(profile_id__in=[p.pk for p in rows]).order_by("collection_id")
    for profile_id, collection_id in links.values_list("profile_id", "collection_id"):
        collections.setdefault(profile_id, []).append(collection_id)
    default = None
    if any(p.model_id is None for p in rows):
        default = Model.objects.select_related("server").filter(is_default=True).first()
    reg = registry()
    return [
        _profile_out(p, p.model if p.model_id is not None else default, collections.get(p.pk, []), group, reg)
        for p in rows
    ]


def profiles_refresh(*, account) -> dict[str, Any]:
    """Discover the models of every enabled server, then list the caller's profiles afresh."""
    reports = discover_models()
    return {"profiles": profiles_for(account=account), "aliases": aliases_for(account=account),
            "servers": [r.as_dict() for r in reports]}


def aliases_for(*, account) -> list[dict[str, Any]]:
    """The aliases the caller's group may chat with, by name, each with its policy and
    whether it is `available`: one of its deployments the group may reach was listed by its server
    at the last discovery, and that discovery did not fail (as a profile's model)."""
    reg = registry()
    aliases = usable_aliases(account.group, reg=reg)
    ids = {d.target.id for pool in aliases for d in pool.deployments}
    listed = set(Model.objects.filter(pk__in=ids, unlisted_since__isnull=True, server__discovery_error="")
                 .values_list("pk", flat=True))
    return [{"name": pool.name, "policy": pool.policy,
             "available": any(d.target.id in listed and "chat" in d.target.capabilities
                              and (account.group.remote_servers_allowed or not d.target.server.is_remote)
                              for d in pool.deployments)}
            for pool in aliases]


def model_available(model: Model | None, *, group, reg: Registry) -> bool:
    if model is None:
        return False
    target = reg.by_id.get(model.pk)
    return (
        target is not None
        and "chat" in target.capabilities
        and group_may_use(group, target, reg)
        and model.unlisted_since is None
        and not model.server.discovery_error
    )


def _profile_out(profile: Profile, model: Model | None, collections: list[int], group, reg: Registry) -> dict:
    return {
        "name": profile.name,
        "title": profile.title,
        "description": profile.description,
        "model": model.public_id if model is not None else None,
        "temperature": profile.temperature,
        "tools": profile.tools,
        "collections": collections,
        "available": model_available(model, group=group, reg=reg),
    }
