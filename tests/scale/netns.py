"""The multi-host stack's network: Linux network namespaces made by the test, one per host, each
joined by a veth pair to a bridge inside a "switch" namespace the test made too. Nothing is added
to the root namespace: the veth pairs are made inside the switch namespace with their host end
moved straight into the host's namespace, and every address is inside a namespace of this run
(10.77.0.0/24, which no other run or host sees) or on its loopback.

Names carry the pid of the test process (`gwscale<pid>-<role>`), so two runs never share one;
`delete()` removes every namespace of this run (and with them their veth pairs and bridge), and
`sweep_stale()` those an earlier run left behind when it was killed before its teardown (only
names of this prefix whose pid is no longer alive).

The test process reaches a host's addresses without an address of its own: `in_netns(name, fn)`
runs `fn` on a thread of its own that first joins the namespace (setns(2) moves only the calling
thread), so the sockets `fn` opens are inside that namespace."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import subprocess
import threading
from pathlib import Path

PREFIX = "gwscale"
SUBNET = "10.77.0"
CLONE_NEWNET = 0x40000000


def ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def sweep_stale() -> list[str]:
    """Namespaces an earlier run of this test left (its process is gone): deleted."""
    removed = []
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        found = re.fullmatch(rf"{PREFIX}(\d+)-[a-z0-9]+", name)
        if found and not Path(f"/proc/{found.group(1)}").exists():
            with contextlib.suppress(RuntimeError):
                ip("netns", "del", name)
                removed.append(name)
    return removed


def in_netns(namespace: str, fn, *args, **kwargs):
    """`fn(*args, **kwargs)` on a new thread that joined the network namespace `namespace`; its
    result (or its exception, raised here)."""
    outcome: dict = {}

    def run():
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {namespace}")
            finally:
                os.close(fd)
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 — handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class Network:
    """A switch namespace with a bridge, and hosts plugged into it by `add_host`."""

    def __init__(self):
        self.tag = f"{PREFIX}{os.getpid()}"
        self.switch = f"{self.tag}-sw"
        self.namespaces: list[str] = []
        self.hosts: dict[str, tuple[str, str]] = {}  # role: (namespace, address)

    def up(self) -> Network:
        if os.geteuid() != 0:
            raise RuntimeError("tests/scale makes network namespaces and needs root, as CI has; without it run "
                               "the suite with --ignore=tests/scale")
        sweep_stale()
        self._netns(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        return self

    def _netns(self, name: str) -> None:
        ip("netns", "add", name)
        self.namespaces.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def add_host(self, role: str, octet: int) -> str:
        """A host `role` at 10.77.0.<octet>; its namespace's name."""
        name = f"{self.tag}-{role}"
        self._netns(name)
        port = f"p{octet}"
        ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", name)
        ip("-n", self.switch, "link", "set", port, "master", "br0")
        ip("-n", self.switch, "link", "set", port, "up")
        ip("-n", name, "addr", "add", f"{SUBNET}.{octet}/24", "dev", "eth0")
        ip("-n", name, "link", "set", "eth0", "up")
        self.hosts[role] = (name, f"{SUBNET}.{octet}")
        return name

    def ns(self, role: str) -> str:
        return self.hosts[role][0]

    def address(self, role: str) -> str:
        return self.hosts[role][1]

    def exec_prefix(self, role: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns(role)]

    def cut_route(self, role: str, to_role: str) -> None:
        """Inside `role`'s namespace only: no route to `to_role` any more (sends fail at once,
        EHOSTUNREACH), the rest of its network untouched."""
        ip("-n", self.ns(role), "route", "add", "unreachable", f"{self.address(to_role)}/32")

    def mend_route(self, role: str, to_role: str) -> None:
        ip("-n", self.ns(role), "route", "del", "unreachable", f"{self.address(to_role)}/32")

    def delete(self) -> None:
        for name in reversed(self.namespaces):
            with contextlib.suppress(RuntimeError):
                ip("netns", "del", name)
        self.namespaces.clear()
