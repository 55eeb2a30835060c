"""A local HTTPS server that receives `webhook:` deliveries, for tests: a self-signed certificate
made on the spot (its PEM is the CA bundle a client trusts), every request recorded, answers
scripted per request."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import hmac
import ipaddress
import json
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "receiver.pem", directory / "receiver.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self):
        return json.loads(self.body)

    def signature_valid(self, secret: str) -> bool:
        sent = self.headers.get("x-svc-signature", "")
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(sent, expected)


@dataclass
class Receiver:
    url: str  # https://127.0.0.1:PORT
    ca_bundle: str
    received: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answers for the next requests; then 200

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the receiver got {len(self.received)} request(s), expected {count}")
            time.sleep(0.02)
        return self.received


@contextlib.contextmanager
def https_receiver():
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = self_signed(Path(tmp))
        holder: dict[str, Receiver] = {}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                receiver = holder["r"]
                receiver.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        holder["r"] = Receiver(url=f"https://127.0.0.1:{server.server_address[1]}", ca_bundle=str(cert_path))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield holder["r"]
        finally:
            server.shutdown()
            server.server_close()
