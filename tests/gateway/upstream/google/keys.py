"""Service accounts for the fake Google: an RSA key made in the test (`cryptography`), its JSON key file as Google
gives it out (with the fake's token endpoint as `token_uri`), and the check of the JWT assertion google-auth
signs with it (RS256 over the header and the claims, the claims those of a token request for the
cloud-platform scope)."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

EMAIL = "gateway@my-project.iam.gserviceaccount.com"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
AUDIENCE = "https://oauth2.googleapis.com/token"  # google-auth's assertions name Google's endpoint, whichever it asks


@dataclass(frozen=True)
class Account:
    email: str
    private_pem: str
    public_pem: str


@lru_cache(maxsize=4)
def account(name: str = "main", email: str = EMAIL) -> Account:
    """A service account's key pair (made once per test process and name)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return Account(email, private, public)


def key_file(folder: Path, who: Account, token_uri: str, name: str = "sa.json") -> str:
    """The account's JSON key file, as the console downloads it, its tokens asked of `token_uri`."""
    path = folder / name
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "my-project", "private_key_id": "0123456789abcdef",
        "private_key": who.private_pem, "client_email": who.email, "client_id": "104242424242424242424",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": token_uri,
    }))
    return str(path)


def _decoded(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def problem(assertion: str, accounts: dict[str, str]) -> str | None:
    """Why `assertion` is refused: None when it is a JWT signed with the key of an account the fake knows, for
    Google's token endpoint and the cloud-platform scope, and not expired."""
    try:
        header_part, claims_part, signature_part = assertion.split(".")
        header, claims = json.loads(_decoded(header_part)), json.loads(_decoded(claims_part))
    except ValueError:
        return "not a JWT"
    if header.get("alg") != "RS256":
        return f"signed with {header.get('alg')}, not RS256"
    public_pem = accounts.get(claims.get("iss"))
    if public_pem is None:
        return f"an account the fake does not know: {claims.get('iss')}"
    public = serialization.load_pem_public_key(public_pem.encode())
    try:
        public.verify(_decoded(signature_part), f"{header_part}.{claims_part}".encode(), padding.PKCS1v15(),
                      hashes.SHA256())
    except InvalidSignature:
        return "the signature does not verify"
    if claims.get("aud") != AUDIENCE:
        return f"for another audience: {claims.get('aud')}"
    if SCOPE not in str(claims.get("scope", "")).split():
        return f"without the cloud-platform scope: {claims.get('scope')}"
    if not claims.get("iat", 0) - 60 <= time.time() <= claims.get("exp", 0):
        return "expired, or not yet valid"
    return None
