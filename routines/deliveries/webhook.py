"""`webhook:https://…`: POST the result as JSON, signed like incoming events when the routine
has a secret (`X-Svc-Signature: sha256=<hex>`). https only; a host that resolves to a private,
loopback or link-local address is refused unless DELIVERY_ALLOW_PRIVATE_ADDRESSES is set.
A 5xx or a timeout is retryable (the dispatcher retries with backoff)."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from routines.deliveries.base import DeliveryFailed
from routines.signatures import sign


def payload(run, text: str) -> bytes:
    body = {
        "routine_id": run.routine_id,
        "run_id": run.pk,
        "event_id": run.event_id or None,
        "trigger": run.trigger,
        "output": text,
        "created_at": run.created_at.isoformat(),
    }
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def send(run, target: str, text: str) -> None:
    url = target.partition(":")[2]
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise DeliveryFailed("Only https:// webhook targets are delivered to.")
    if not settings.DELIVERY_ALLOW_PRIVATE_ADDRESSES:
        refuse_private_host(parts.hostname, parts.port or 443)
    body = payload(run, text)
    headers = {"Content-Type": "application/json", "User-Agent": "model-gateway-routines/1"}
    if run.routine.webhook_secret:
        headers["X-Svc-Signature"] = "sha256=" + sign(run.routine.webhook_secret, body)
    verify = ssl.create_default_context(cafile=settings.DELIVERY_CA_BUNDLE or None)
    try:
        with httpx.Client(timeout=settings.DELIVERY_TIMEOUT_SECONDS, verify=verify, follow_redirects=False) as client:
            response = client.post(url, content=body, headers=headers)
    except httpx.TimeoutException:
        raise DeliveryFailed("The webhook target did not answer in time.", retryable=True) from None
    except httpx.TransportError as exc:
        raise DeliveryFailed(f"The webhook target could not be reached: {exc}", retryable=True) from None
    if response.status_code >= 500:
        raise DeliveryFailed(f"The webhook target answered {response.status_code}.", retryable=True)
    if response.status_code >= 300:
        raise DeliveryFailed(f"The webhook target answered {response.status_code}.")


def refuse_private_host(host: str, port: int) -> None:
    """Refuse a host any of whose addresses is private, loopback, link-local or otherwise not
    public (a name resolving to an internal service must not be reachable through a routine)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise DeliveryFailed(f"The webhook host '{host}' does not resolve.", retryable=True) from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            raise DeliveryFailed(f"The webhook host '{host}' resolves to a non-public address ({address}); refused.")
