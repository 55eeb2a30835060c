"""For the tests of egress through a proxy (gateway/upstream/egress.py): Debian's tinyproxy on a loopback
port (its config in a temp dir, in the foreground in a session of its own, stopped by its pid, its log
kept to prove what went through it), the reference upstream served over TLS with a certificate made on
the spot, and a fixture that clears the proxy variables around a test."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateway.upstream import egress
from tests.faults.services import wait_for
from tests.servers import free_port, serving
from tests.upstream import Upstream
from tests.upstream.app import UpstreamApp
from tests.upstream.core import State

TINYPROXY = "/usr/bin/tinyproxy"
VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
             "no_proxy", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR")


@pytest.fixture
def proxy_env(monkeypatch):
    """No proxy variable set; the client reads the environment afresh before and after the test.
    Returns a function that sets variables and makes the client read them."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    egress.reset()

    def set_env(**variables: str) -> None:
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        egress.reset()

    yield set_env
    egress.reset()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@dataclass
class Tinyproxy:
    port: int
    log_path: Path
    user: str | None = None
    password: str | None = None

    @property
    def url(self) -> str:
        credentials = f"{self.user}:{self.password}@" if self.user else ""
        return f"http://{credentials}127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def requests(self) -> list[str]:
        """The request lines the proxy logged ("POST http://... HTTP/1.1", "CONNECT host:port HTTP/1.1")."""
        return [line.split("): ", 1)[1] for line in self.log().splitlines() if "Request (file descriptor" in line]

    def wait_for(self, line: str, timeout: float = 5.0) -> None:
        wait_for(lambda: line in self.requests(), timeout, f"{line!r} in the proxy's log")


@contextlib.contextmanager
def tinyproxy(directory: Path, *, user: str | None = None, password: str | None = None):
    port = free_port()
    lines = [f"Port {port}", "Listen 127.0.0.1", "Timeout 30", "LogLevel Connect", "MaxClients 50",
             "Allow 127.0.0.1", "DisableViaHeader Yes"]
    if os.geteuid() == 0:  # as root it must be told whom to run as
        lines += ["User nobody", "Group nogroup"]
    if user:
        lines.append(f"BasicAuth {user} {password}")
    conf = directory / "tinyproxy.conf"
    conf.write_text("\n".join(lines) + "\n")
    log_path = directory / "tinyproxy.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([TINYPROXY, "-d", "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: proc.poll() is not None or _listening(port), 10, "tinyproxy to listen")
        assert proc.poll() is None, log_path.read_text()
        yield Tinyproxy(port, log_path, user, password)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: its pid is its process group
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def certificate(directory: Path, *, addresses=("127.0.0.1",), names=("localhost",)) -> tuple[Path, Path]:
    """A self-signed certificate (its PEM is the CA bundle a client trusts) for these names."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "model server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    alternatives = [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses] + [x509.DNSName(n) for n in names]
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@contextlib.contextmanager
def tls_upstream(cert_path: Path, key_path: Path):
    """The reference upstream (tests/upstream) served over TLS on loopback: https://127.0.0.1:PORT."""
    state = State()
    with serving(UpstreamApp(state), cert=cert_path, key=key_path, name="tls-upstream") as url:
        yield Upstream(state, url)


PROXY_PASSWORD = "pr0xy-s3cret-Pa55"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """A tinyproxy on loopback for the module's tests."""
    with tinyproxy(tmp_path_factory.mktemp("tinyproxy")) as running:
        yield running


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A tinyproxy that asks for credentials (user `gw`, PROXY_PASSWORD)."""
    with tinyproxy(tmp_path_factory.mktemp("tinyproxy-auth"), user="gw", password=PROXY_PASSWORD) as running:
        yield running
