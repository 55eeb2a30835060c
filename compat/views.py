"""GET /v1/models."""


from accounts.endpoints import endpoint
from gateway.limits import ratelimit
from gateway.registry.routing import usable_aliases, usable_targets
from gateway.web.output import respond

ALIAS_OWNER = "gateway"  # an alias is the gateway's own name, over models of several servers


@endpoint("GET", limit=ratelimit.V1)
def models(request):
    """The models the caller may use, then the aliases it may use, in the OpenAI list shape."""
    group = request.principal.account.group
    data = [
        {"id": t.public_id, "object": "model", "created": t.created, "owned_by": t.server.name}
        for t in usable_targets(group)
    ]
    data += [{"id": p.name, "object": "model", "created": p.created, "owned_by": ALIAS_OWNER}
             for p in usable_aliases(group, capability=None)]
    return respond({"object": "list", "data": data})
