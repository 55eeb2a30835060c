"""The /v1 compatibility surface."""

from django.http import JsonResponse

from accounts.endpoints import endpoint
from gateway import ratelimit
from gateway.registry import models_usable_by


@endpoint("GET", limit=ratelimit.V1)
def models(request):
    """The models the caller may use, in the OpenAI list shape."""
    group = request.principal.account.group
    data = [
        {"id": m.public_id, "object": "model", "created": int(m.created_at.timestamp()), "owned_by": m.server.name}
        for m in models_usable_by(group)
    ]
    return JsonResponse({"object": "list", "data": data})
