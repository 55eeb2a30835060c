"""GET /metrics: every process's series in Prometheus' text format (gateway/ops/metrics_collectors.py).

Who may scrape: with METRICS_TOKEN set, a request with `Authorization: Bearer <token>` (compared
in constant time; anything else is 401); without it, loopback clients only (403 otherwise): the
client's address as gateway.limits.ratelimit.client_address sees it, so a request relayed by one of
TRUSTED_PROXIES is judged by the address the proxy saw, never by the proxy's own. No request
ceiling applies, and a scrape is logged at DEBUG (gateway/telemetry/logjson.py), not at INFO.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

from gateway.limits.ratelimit import client_address
from gateway.ops.metrics_collectors import exposition


def metrics(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        response = JsonResponse({"message": "Method Not Allowed."}, status=405)
        response["Allow"] = "GET, HEAD"
        return response
    refusal = scrape_refusal(request)
    if refusal is not None:
        return refusal
    response = HttpResponse(exposition(), content_type=CONTENT_TYPE_PLAIN_0_0_4)  # every scraper reads it
    response["Cache-Control"] = "no-store"
    return response


def scrape_refusal(request: HttpRequest) -> HttpResponse | None:
    token = settings.METRICS_TOKEN
    if token:
        scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode()):
            return None
        response = JsonResponse({"message": "A bearer token is required: Authorization: Bearer <METRICS_TOKEN>."},
                                status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if is_loopback(client_address(request)):
        return None
    return JsonResponse({"message": "Metrics are served to loopback clients only; set METRICS_TOKEN to scrape "
                                    "from elsewhere."}, status=403)


def is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback
