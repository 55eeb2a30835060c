"""The container tools of the image test (tests/container/test_image.py): Debian's buildah, podman and runc,
and a base image of Debian bookworm made here by debootstrap, since no image registry can be reached.

The base's root is made once and kept as a tarball under ~/.cache/gateway-container/, named by a hash of
what makes it (suite, variant, package list, mirror): a later run imports the tarball (seconds) rather than
run debootstrap again (minutes). podman's default runtime, crun, fails in this sandbox: every podman
command gets `--runtime runc`, and a containers.conf with no default ulimits (CONTAINERS_CONF), whose
raising of the open files limit the sandbox refuses too."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("python3", "python3-venv", "python3-pip")
BASE_IMAGE = "localhost/gateway-base:bookworm"
CACHE = Path.home() / ".cache" / "gateway-container"
CONTAINERS_CONF = "[containers]\ndefault_ulimits = []\n"
NEEDED = ("buildah", "podman", "runc", "debootstrap")
ROOT = Path(__file__).resolve().parents[2]


def missing_tools() -> list[str]:
    return [tool for tool in NEEDED if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]


def environment(folder: Path) -> dict[str, str]:
    """The environment of every buildah and podman command: the containers.conf above."""
    conf = folder / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def run(args: list[str], env: dict[str, str], timeout: float, check: bool = True,
        stdin: str | None = None) -> subprocess.CompletedProcess:
    """`args` in a session of its own; its output kept; an AssertionError quoting it when it fails."""
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, input=stdin,
                          start_new_session=True, check=False, stdin=None if stdin is not None else subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited with {done.returncode}:\n{done.stdout[-4000:]}\n"
                             f"{done.stderr[-4000:]}")
    return done


def base_tarball() -> Path:
    """The cached root of the base image, made by debootstrap when missing."""
    key = hashlib.sha256(f"{SUITE} minbase {','.join(PACKAGES)} {MIRROR}".encode()).hexdigest()[:16]
    tarball = CACHE / f"debian-{SUITE}-{key}.tar"
    if tarball.exists():
        return tarball
    CACHE.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="gw-debootstrap-"))
    try:
        run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(root), MIRROR],
            env=dict(os.environ), timeout=1800)
        shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        draft = tarball.with_suffix(f".{os.getpid()}.part")
        with open(draft, "wb") as out:
            subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=out, check=True,
                           timeout=600, start_new_session=True)
        draft.rename(tarball)  # whole or not at all: a run stopped halfway leaves no tarball to trust
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return tarball


def import_base(env: dict[str, str]) -> float:
    """The base image in podman's store (imported from the cached tarball); the seconds it took."""
    started = time.monotonic()
    tarball = base_tarball()
    if run(["podman", "image", "exists", BASE_IMAGE], env=env, timeout=60, check=False).returncode != 0:
        with open(tarball, "rb") as source:
            done = subprocess.run(["podman", "import", "-", BASE_IMAGE], stdin=source, env=env, capture_output=True,
                                  text=True, timeout=600, start_new_session=True, check=False)
        assert done.returncode == 0, f"podman import failed:\n{done.stdout}\n{done.stderr}"
    return time.monotonic() - started


def pip_secrets(folder: Path) -> list[str]:
    """buildah's `--secret` arguments that give pip in the build stage this machine's way to PyPI: a pip.conf
    of its index URLs (the http ones: a file:// index of this machine is not in the build), timeout and
    CA file, the CA file itself beside it. Build secrets: no layer of the image keeps them."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                          timeout=60, check=False)
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.partition(".")
        if section in ("global", "install", ":env:") and value:
            found[name] = value.strip().strip("'\"")
    for name in ("index-url", "extra-index-url", "trusted-host", "cert", "timeout", "default-timeout"):
        value = os.environ.get("PIP_" + name.upper().replace("-", "_"))
        if value:
            found[name] = value
    lines = ["[global]"]
    for name in ("index-url", "extra-index-url"):
        urls = [url for url in found.get(name, "").split() if url.startswith(("http://", "https://"))]
        if urls:
            lines.append(f"{name} = {' '.join(urls)}")
    if found.get("trusted-host"):
        lines.append(f"trusted-host = {found['trusted-host']}")
    if found.get("timeout") or found.get("default-timeout"):
        lines.append(f"timeout = {found.get('timeout') or found['default-timeout']}")
    ca = found.get("cert") or os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE")
    secrets = []
    if ca and Path(ca).is_file():
        lines.append("cert = /run/secrets/pip-ca")
        secrets += ["--secret", f"id=pip-ca,src={ca}"]
    conf = folder / "pip.conf"
    conf.write_text("\n".join(lines) + "\n")
    return ["--secret", f"id=pip.conf,src={conf}", *secrets]


def image_id(tag: str, env: dict[str, str]) -> str:
    done = run(["podman", "image", "inspect", "--format", "{{.Id}}", tag], env=env, timeout=60, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def build(tag: str, env: dict[str, str], folder: Path) -> None:
    """The Containerfile built on the debootstrap base, as `tag`. Layers are kept (--layers) and the build
    stage is tagged too (`tag` with -build), so that a later run with the same requirements.txt takes the venv
    from the cache instead of pip. The images an earlier run tagged so, replaced now, are removed (with the
    untagged layers only they used), and no other image of the machine is touched. The docker format keeps
    the HEALTHCHECK, which OCI's image config has no field for."""
    common = ["buildah", "bud", "--isolation", "chroot", "--format", "docker", "--layers", "--build-arg",
              f"BASE={BASE_IMAGE}", *pip_secrets(folder), "-f", str(ROOT / "Containerfile")]
    for target, name in (("build", f"{tag}-build"), (None, tag)):
        before = image_id(name, env)
        run([*common, *(["--target", target] if target else []), "-t", name, str(ROOT)], env=env, timeout=1800)
        if before and before != image_id(name, env):
            run(["podman", "rmi", before], env=env, timeout=300, check=False)  # kept if a newer image uses it
