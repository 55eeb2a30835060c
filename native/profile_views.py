"""`GET /api/v1/profiles` and `POST /api/v1/profiles/refresh` (spec 4.9, 8.1: 60 per minute on
the shared counter, not on the 300 one). Errors are `{detail}`."""


from accounts.endpoints import endpoint
from gateway.limits import ratelimit
from gateway.web.output import respond
from native.profiles import aliases_for, profiles_for, profiles_refresh


@endpoint("GET", limit=ratelimit.PROFILES)
def profile_list(request):
    account = request.principal.account
    return respond({"profiles": profiles_for(account=account), "aliases": aliases_for(account=account)})


@endpoint("POST", limit=ratelimit.PROFILES)
def profile_refresh(request):
    """Any caller of the API may refresh (the spec lists it with the caller's endpoints): the
    writes only bring the registry in line with what the servers list."""
    return respond(profiles_refresh(account=request.principal.account))
