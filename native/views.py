"""The native /api/v1 surface."""

from django.conf import settings
from django.http import JsonResponse

from accounts.endpoints import endpoint
from gateway import ratelimit
from gateway.usage import usage_summary


@endpoint("GET", limit=ratelimit.VERSION)
def version(request):
    return JsonResponse(
        {"service": "model-gateway", "version": settings.SERVICE_VERSION, "api_version": settings.API_VERSION}
    )


@endpoint("GET")
def usage(request):
    """Token quotas and this month's usage of the caller (spec 8.4)."""
    return JsonResponse(usage_summary(account=request.principal.account))
