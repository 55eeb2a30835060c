"""GET /v1/models."""


from accounts.endpoints import endpoint
from gateway.limits import ratelimit
from gateway.registry.routing import usable_targets
from gateway.web.output import respond


@endpoint("GET", limit=ratelimit.V1)
def models(request):
    """The models the caller may use, in the OpenAI list shape."""
    data = [
        {"id": t.public_id, "object": "model", "created": t.created, "owned_by": t.server.name}
        for t in usable_targets(request.principal.account.group)
    ]
    return respond({"object": "list", "data": data})
