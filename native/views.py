"""The native /api/v1 surface."""

from django.conf import settings
from django.http import JsonResponse

from accounts.endpoints import endpoint
from gateway import ratelimit


@endpoint("GET", limit=ratelimit.VERSION)
def version(request):
    return JsonResponse(
        {"service": "model-gateway", "version": settings.SERVICE_VERSION, "api_version": settings.API_VERSION}
    )
