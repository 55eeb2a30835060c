"""The native /api/v1 surface."""

from django.conf import settings

from accounts.endpoints import endpoint
from gateway.limits import ratelimit
from gateway.limits.usage_report import usage_summary
from gateway.web.output import respond


@endpoint("GET", limit=ratelimit.VERSION)
def version(request):
    return respond(
        {"service": "model-gateway", "version": settings.SERVICE_VERSION, "api_version": settings.API_VERSION}
    )


@endpoint("GET")
def usage(request):
    """Token quotas and this month's usage of the caller (spec 8.4)."""
    return respond(usage_summary(account=request.principal.account))
