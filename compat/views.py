"""GET /v1/models."""


from accounts.endpoints import endpoint
from gateway import ratelimit
from gateway.output import respond
from gateway.routing import usable_targets


@endpoint("GET", limit=ratelimit.V1)
def models(request):
    """The models the caller may use, in the OpenAI list shape."""
    data = [
        {"id": t.public_id, "object": "model", "created": t.created, "owned_by": t.server.name}
        for t in usable_targets(request.principal.account.group)
    ]
    return respond({"object": "list", "data": data})
