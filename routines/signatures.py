"""HMAC-SHA256 signatures of webhook bodies (spec 5.4), incoming and outgoing alike; and the
Standard Webhooks signatures a routine may opt in to (id and timestamp signed with the body)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
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


# --- Standard Webhooks (https://www.standardwebhooks.com), a routine's opt-in scheme -------------
#
# The spec's signature covers the body only, so a delivery seen once can be sent again under a new
# X-Event-Id. A routine whose `webhook_signature_scheme` is "standard" takes instead the headers
# `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature` (space-separated
# `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, any one matching is enough); the timestamp must be
# within five minutes of the server's clock either way, and the id is the event id, so the duplicate
# window refuses the same delivery sent again while its timestamp is still accepted.

STANDARD_TOLERANCE_SECONDS = 300
STANDARD_SECRET_PREFIX = "whsec_"
STANDARD_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
_TIMESTAMP_FORM = re.compile(r"[0-9]{1,15}")

# The outcomes of `standard_check`.
STANDARD_OK = "ok"
STANDARD_BAD_SIGNATURE = "signature"  # a header missing or malformed, or no signature matches
STANDARD_BAD_TIMESTAMP = "timestamp"  # correctly signed, but stale or from the future


def standard_keys(secret: str) -> list[bytes]:
    """The HMAC keys a routine's secret stands for under the Standard Webhooks scheme.

    - `whsec_<base64>` (the scheme's own form): the bytes the base64 decodes to, only those.
    - any other secret (the 64 hex characters the server generates, or one the caller chose): its
      UTF-8 bytes, the same key the body scheme uses; and, when the secret is also valid base64
      (the generated hex secrets are), the bytes it decodes to, which is the key the reference
      library's `Webhook(secret)` takes from a secret without the prefix. Both come from the secret
      alone: whoever does not know it can sign under neither."""
    if secret.startswith(STANDARD_SECRET_PREFIX):
        decoded = _base64(secret[len(STANDARD_SECRET_PREFIX):])
        if decoded:
            return [decoded]
    keys = [secret.encode("utf-8")]
    decoded = _base64(secret)
    if decoded and decoded not in keys:
        keys.append(decoded)
    return keys


def standard_sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under `key` (see `standard_keys`)."""
    content = _header_bytes(msg_id) + b"." + str(int(timestamp)).encode("ascii") + b"." + body
    return "v1," + base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode("ascii")


def standard_check(secret: str, body: bytes, headers: Mapping[str, str], *, now: float | None = None) -> str:
    """STANDARD_OK, STANDARD_BAD_SIGNATURE or STANDARD_BAD_TIMESTAMP for one delivery. `headers`
    has lowercase names. The signature is checked before the timestamp, so only a sender that knows
    the secret learns that its clock (or a replay's age) was the problem."""
    msg_id = headers.get("webhook-id") or ""
    stamp = (headers.get("webhook-timestamp") or "").strip()
    sent = headers.get("webhook-signature") or ""
    if not msg_id.strip() or not _TIMESTAMP_FORM.fullmatch(stamp) or not sent.strip():
        return STANDARD_BAD_SIGNATURE
    timestamp = int(stamp)
    content = _header_bytes(msg_id) + b"." + str(timestamp).encode("ascii") + b"." + body
    expected = [hmac.new(key, content, hashlib.sha256).digest() for key in standard_keys(secret)]
    matched = False
    for item in sent.split():
        version, _, encoded = item.partition(",")
        if version != "v1":
            continue
        candidate = _base64(encoded)
        if candidate is not None and any(hmac.compare_digest(candidate, digest) for digest in expected):
            matched = True
            break
    if not matched:
        return STANDARD_BAD_SIGNATURE
    now = time.time() if now is None else now
    if timestamp < now - STANDARD_TOLERANCE_SECONDS or timestamp > now + STANDARD_TOLERANCE_SECONDS:
        return STANDARD_BAD_TIMESTAMP
    return STANDARD_OK


def _base64(text: str) -> bytes | None:
    """Standard base64 (padding optional), strictly: None when it is not."""
    text = text.strip()
    if not text or len(text) % 4 == 1:
        return None
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _header_bytes(value: str) -> bytes:
    """A header value as the sender's bytes (servers hand them over decoded as Latin-1)."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")
