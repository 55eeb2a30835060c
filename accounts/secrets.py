"""Making and hashing the secrets the service hands out (API keys and session tokens)."""

import hashlib
import secrets
import string

ALPHANUMERIC = string.ascii_letters + string.digits


def random_alnum(length: int) -> str:
    return "".join(secrets.choice(ALPHANUMERIC) for _ in range(length))


def digest(secret: str) -> str:
    """SHA-256 in hex: what is stored in place of a key or token. The secrets are 190+ bits of
    randomness, so a fast unsalted hash is enough and keeps the lookup one indexed query."""
    return hashlib.sha256(secret.encode()).hexdigest()
