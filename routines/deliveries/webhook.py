"""`webhook:https://…`: POST the result as JSON, signed like incoming events when the routine
has a secret (`X-Svc-Signature: sha256=<hex>`). https only; a host that resolves to a private,
loopback or link-local address (IPv4 carried in IPv6 included) is refused unless
DELIVERY_ALLOW_PRIVATE_ADDRESSES is set, and the connection goes to the address that was checked.
A 5xx or a timeout is retryable (the dispatcher retries with backoff)."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from gateway.web.output import timestamp
from routines.deliveries.base import DeliveryFailed
from routines.signatures import sign

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
NAT64 = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use translation (RFC 8215): never public


def payload(run, text: str) -> bytes:
    body = {
        "routine_id": run.routine_id,
        "run_id": run.pk,
        "event_id": run.event_id or None,
        "trigger": run.trigger,
        "output": text,
        "created_at": timestamp(run.created_at),
    }
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def send(run, target: str, text: str) -> None:
    url = target.partition(":")[2]
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise DeliveryFailed("Only https:// webhook targets are delivered to.")
    try:
        original = httpx.URL(url)
    except httpx.InvalidURL:
        raise DeliveryFailed("The webhook URL is not valid.") from None
    # The host is resolved once; the connection goes to the address that was checked (a second
    # lookup could answer differently: DNS rebinding). Host header, SNI and the certificate
    # check keep the name from the URL.
    host = original.raw_host.decode("ascii")
    address = checked_address(host, original.port or 443)
    body = payload(run, text)
    headers = {"Content-Type": "application/json", "User-Agent": "model-gateway-routines/1",
               "Host": original.netloc.decode("ascii")}
    if run.routine.webhook_secret:
        headers["X-Svc-Signature"] = "sha256=" + sign(run.routine.webhook_secret, body)
    verify = ssl.create_default_context(cafile=settings.DELIVERY_CA_BUNDLE or None)
    try:
        with httpx.Client(timeout=settings.DELIVERY_TIMEOUT_SECONDS, verify=verify, follow_redirects=False,
                          trust_env=False) as client:
            response = client.post(original.copy_with(host=str(address)), content=body, headers=headers,
                                   extensions={"sni_hostname": host})
    except httpx.TimeoutException:
        raise DeliveryFailed("The webhook target did not answer in time.", retryable=True) from None
    except httpx.TransportError:  # no OS error text: it would tell open ports from closed ones
        raise DeliveryFailed("The webhook target could not be reached.", retryable=True) from None
    if response.status_code >= 500:
        raise DeliveryFailed(f"The webhook target answered {response.status_code}.", retryable=True)
    if response.status_code >= 300:
        raise DeliveryFailed(f"The webhook target answered {response.status_code}.")


def checked_address(host: str, port: int) -> IPAddress:
    """The one address of `host` to connect to. Unless DELIVERY_ALLOW_PRIVATE_ADDRESSES is set,
    every address the host resolves to must be public."""
    addresses = _resolve(host, port)
    if not settings.DELIVERY_ALLOW_PRIVATE_ADDRESSES:
        _refuse_private(host, addresses)
    return addresses[0]


def refuse_private_host(host: str, port: int) -> None:
    """Refuse a host any of whose addresses is private, loopback, link-local or otherwise not
    public (a name resolving to an internal service must not be reachable through a routine)."""
    _refuse_private(host, _resolve(host, port))


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise DeliveryFailed(f"The webhook host '{host}' does not resolve.", retryable=True) from None
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    if not addresses:
        raise DeliveryFailed(f"The webhook host '{host}' does not resolve.", retryable=True)
    return addresses


def _refuse_private(host: str, addresses: list[IPAddress]) -> None:
    for address in addresses:
        address = embedded_ipv4(address)
        if not address.is_global or address.is_multicast or address in NAT64_LOCAL:
            raise DeliveryFailed(f"The webhook host '{host}' resolves to a non-public address; refused.")


def embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries and reaches (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible
    ::a.b.c.d, NAT64 64:ff9b::a.b.c.d, 6to4 2002:aabb:ccdd::), so it is checked as that address."""
    if not isinstance(address, ipaddress.IPv6Address):
        return address
    if address.ipv4_mapped:
        return address.ipv4_mapped
    if address.sixtofour:
        return address.sixtofour
    if address in NAT64 or address.packed[:12] == bytes(12):
        return ipaddress.IPv4Address(address.packed[12:])
    return address
