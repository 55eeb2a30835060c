"""HMAC-SHA256 signatures of webhook bodies (spec 5.4), incoming and outgoing alike."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

SIGNATURE_HEADERS = ("x-svc-signature", "x-hub-signature-256")


def sign(secret: str, body: bytes) -> str:
    """Lowercase hex HMAC-SHA256 of the exact bytes."""
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def signature_valid(secret: str, body: bytes, headers: Mapping[str, str]) -> bool:
    """True when `X-Svc-Signature` or `X-Hub-Signature-256` (`sha256=` optional) is the HMAC
    of `body` under `secret`, compared in constant time. `headers` has lowercase names."""
    expected = sign(secret, body)
    for name in SIGNATURE_HEADERS:
        sent = (headers.get(name) or "").strip()
        if sent.lower().startswith("sha256="):
            sent = sent[len("sha256="):]
        if sent and hmac.compare_digest(sent.lower().encode("ascii", "replace"), expected.encode("ascii")):
            return True
    return False
