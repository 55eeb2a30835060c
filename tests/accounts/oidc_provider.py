"""A real OpenID Connect provider on loopback for the single sign-on tests, built from pyop (IdentityPython's
provider library, pinned in requirements-test.txt): discovery, JWKS, authorize, token and userinfo over
https (pyop's configuration must name an https issuer), with a certificate made for 127.0.0.1 by the test.

Its authorize page is a sign-in form that asks which of its users signs in and then consents for them at
once (no consent screen): the test, or the browser, names the user. ID tokens are RS256, with the nonce of
the authorization request; the userinfo gives the scopes' claims (email, email_verified, name).

`running_provider` writes the configuration, starts this file as a program in a session of its own, waits
for its discovery document, and stops it by its pid at the end.
"""

from __future__ import annotations

import contextlib
import datetime
import html
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs

import httpx

CLIENT_ID = "gateway-console"
CLIENT_SECRET = "a-test-client-secret-of-the-gateway"  # noqa: S105 — the loopback provider's test client


@dataclass(frozen=True)
class RunningProvider:
    issuer: str
    ca_file: Path  # the certificate to trust (REQUESTS_CA_BUNDLE of the gateway process)
    pid: int

    def trust(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (valid an hour) and its key, as PEM files."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(hours=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "provider-cert.pem", folder / "provider-key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@contextlib.contextmanager
def running_provider(folder: Path, *, port: int, redirect_uri: str, users: dict[str, dict]):
    """The provider on https://127.0.0.1:<port>, knowing one client (CLIENT_ID, its secret posted to the
    token endpoint, `redirect_uri`) and `users` (a name: its claims). Stopped by its pid at the end."""
    cert_file, key_file = _certificate(folder)
    config = folder / "provider.json"
    config.write_text(json.dumps({"port": port, "cert": str(cert_file), "key": str(key_file),
                                  "redirect_uri": redirect_uri, "users": users}))
    log = open(folder / "provider.log", "wb")  # noqa: SIM115 — closed in the finally below
    proc = subprocess.Popen([sys.executable, __file__, str(config)], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    issuer = f"https://127.0.0.1:{port}"
    trusted = ssl.create_default_context(cafile=str(cert_file))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{issuer}/.well-known/openid-configuration", verify=trusted).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the OIDC provider did not start:\n{(folder / 'provider.log').read_text()}")
            time.sleep(0.1)
        yield RunningProvider(issuer, cert_file, proc.pid)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


# --- the provider program ---------------------------------------------------------------------------

def _provider(config: dict):
    from Cryptodome.PublicKey import RSA
    from jwkest.jwk import RSAKey
    from pyop.authz_state import AuthorizationState
    from pyop.provider import Provider
    from pyop.subject_identifier import HashBasedSubjectIdentifierFactory
    from pyop.userinfo import Userinfo

    issuer = f"https://127.0.0.1:{config['port']}"
    configuration = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "userinfo_endpoint": f"{issuer}/userinfo",
        "jwks_uri": f"{issuer}/jwks",
        "scopes_supported": ["openid", "email", "profile"],
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
    }
    clients = {CLIENT_ID: {"client_secret": CLIENT_SECRET, "redirect_uris": [config["redirect_uri"]],
                           "response_types": ["code"], "token_endpoint_auth_method": "client_secret_post"}}
    signing_key = RSAKey(key=RSA.generate(2048), alg="RS256", kid="loopback-test-key")
    state = AuthorizationState(HashBasedSubjectIdentifierFactory("loopback-salt"))
    return Provider(signing_key, configuration, state, clients, Userinfo(config["users"]))


def _app(provider, users: dict):
    from oic.oic.message import TokenErrorResponse
    from pyop.exceptions import InvalidAuthenticationRequest, OAuthError

    def sign_in_form(query: str, error: str = "") -> bytes:
        return (f"<!doctype html><title>Loopback provider</title><h1>Sign in</h1><p id='error'>{html.escape(error)}</p>"
                f"<form method='post' action='/authorize?{html.escape(query)}'><label>User "
                "<input id='username' name='username' autofocus></label> "
                "<button id='sign-in' type='submit'>Sign in</button></form>").encode()

    def app(environ, start_response):
        path, method, query = environ["PATH_INFO"], environ["REQUEST_METHOD"], environ.get("QUERY_STRING", "")
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)).decode() if method == "POST" else ""
        headers = {"Authorization": environ.get("HTTP_AUTHORIZATION")} if environ.get("HTTP_AUTHORIZATION") else {}

        def answer(status, content, content_type="application/json", extra=()):
            data = content if isinstance(content, bytes) else json.dumps(content).encode()
            start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(data))), *extra])
            return [data]

        if path == "/.well-known/openid-configuration":
            return answer("200 OK", provider.provider_configuration.to_dict())
        if path == "/jwks":
            return answer("200 OK", provider.jwks)
        if path == "/authorize":
            try:
                request = provider.parse_authentication_request(query)
            except InvalidAuthenticationRequest as exc:
                return answer("400 Bad Request", {"error": "invalid_request", "error_description": str(exc)})
            if method != "POST":
                return answer("200 OK", sign_in_form(query), "text/html; charset=utf-8")
            user = (parse_qs(body).get("username") or [""])[0]
            if user not in users:
                return answer("200 OK", sign_in_form(query, f"No user {user!r}."), "text/html; charset=utf-8")
            location = provider.authorize(request, user).request(request["redirect_uri"], False)
            return answer("303 See Other", b"", "text/plain", [("Location", location)])
        if path == "/token" and method == "POST":
            try:
                return answer("200 OK", provider.handle_token_request(body, headers).to_dict())
            except OAuthError as exc:
                error = TokenErrorResponse(error=exc.oauth_error, error_description=str(exc))
                return answer("400 Bad Request", error.to_dict())
            except Exception as exc:  # pyop's client authentication and unknown codes
                return answer("401 Unauthorized", {"error": "invalid_client", "error_description": str(exc)})
        if path == "/userinfo":
            try:
                return answer("200 OK", provider.handle_userinfo_request(body or query, headers).to_dict())
            except Exception as exc:  # a wrong or expired access token
                return answer("401 Unauthorized", {"error": "invalid_token", "error_description": str(exc)})
        return answer("404 Not Found", {"error": "not_found"})

    return app


def main(config_path: str) -> None:
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 — the standard library's own name
            sys.stderr.write("provider: " + format % args + "\n")

    config = json.loads(Path(config_path).read_text())
    server = make_server("127.0.0.1", config["port"], _app(_provider(config), config["users"]), server_class=Server,
                         handler_class=QuietHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(config["cert"], config["key"])
    server.socket = context.wrap_socket(server.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1])
