"""The host's drainer under the Procfile's `web` (gunicorn with gateway/gunicorn_conf.py, one worker), on a disk
of its own beside the private stack: the worker lets its spool files go and gunicorn's dirty worker writes them;
stopped, the files wait for it; gone, the worker writes its own until gunicorn has started another; and at a
SIGTERM the worker writes what it holds before it exits, so nothing waits on the disk for a next start."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import httpx

from gateway.usage import host_drain
from gateway.usage.spool import RELEASED, SUFFIX
from tests.faults import checks
from tests.faults.services import BIN, Service, child_pids, free_port, wait_for
from tests.faults.stack import Stack
from tests.faults.test_faults import DEFAULT_MODEL, LIMITS, _account

CALLS = 5
WRITTEN_SECONDS = 15.0  # the drainer's cycle is USAGE_FLUSH_SECONDS (0.5 s): well within


def _procfile_web(stack: Stack, disk: Path, port: int) -> Service:
    env = {**stack.env, "GATEWAY_VAR_DIR": str(disk), "HOME": str(disk)}  # a host of its own: its spool, its socket
    return Service("procfile-web", [str(BIN / "gunicorn"), "gateway.asgi:application", "-k",
                                    "uvicorn_worker.UvicornWorker", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                                    "-c", "python:gateway.gunicorn_conf", "--forwarded-allow-ips", ""],
                   env=env, logs=stack.logs, ready=lambda: _answers(port))


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


def _arbiter_and_drainer(master: int) -> tuple[int, int] | None:
    """gunicorn's dirty arbiter (the master's child with a child) and its dirty worker, the drainer."""
    for child in child_pids(master):
        grandchildren = child_pids(child)
        if len(grandchildren) == 1:
            return child, grandchildren[0]
    return None


def _calls(port: int, key: str) -> set[str]:
    ids = set()
    with httpx.Client(timeout=30) as client:
        for _ in range(CALLS):
            request_id = f"drain-{uuid.uuid4().hex[:12]}"
            response = client.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                                   json={"model": DEFAULT_MODEL, "messages": [{"role": "user", "content": "hi"}]},
                                   headers={"Authorization": f"Bearer {key}", "X-Request-Id": request_id})
            assert response.status_code == 200, response.text
            ids.add(request_id)
    return ids


def _written(stack: Stack, account_id: int, ids: set[str]) -> set[str]:
    usage = checks._usage_by_request(stack, account_id)
    return {request_id for request_id in ids if usage[request_id] == 1}


def _waiting(folder: Path) -> list[str]:
    """The spool files (usage and calls) that hold records."""
    return sorted(p.name for p in folder.rglob("*" + SUFFIX) if p.stat().st_size)


def test_the_drainer_writes_what_the_worker_lets_go_and_nothing_waits_after_a_stop(live: Stack, tmp_path):
    account = _account(live, "drain", **LIMITS)
    port = free_port()
    web = _procfile_web(live, tmp_path, port)
    web.start(timeout=60)
    try:
        pair = wait_for(lambda: _arbiter_and_drainer(web.pid), 30, "gunicorn's dirty worker")
        arbiter, drainer = pair
        folder = wait_for(lambda: next((p.parent for p in tmp_path.glob("spool/*/" + host_drain.DRAINER_LOCK)), None),
                          30, "the drainer's lock")
        wait_for(lambda: host_drain.present(folder), 30, "the drainer holding its lock")

        # running: the drainer writes what the worker lets go
        ids = _calls(port, account["key"])
        wait_for(lambda: _written(live, account["account_id"], ids) == ids, WRITTEN_SECONDS, "the calls' usage")
        wait_for(lambda: not _waiting(folder), WRITTEN_SECONDS, "the spools empty")

        # stopped: the worker still lets its files go, and they wait for it
        os.kill(drainer, signal.SIGSTOP)
        try:
            ids = _calls(port, account["key"])
            wait_for(lambda: any(name.endswith(RELEASED) for name in _waiting(folder)), WRITTEN_SECONDS,
                     "the worker's files let go")
            assert not _written(live, account["account_id"], ids), "written while the drainer was stopped"
        finally:
            os.kill(drainer, signal.SIGCONT)
        wait_for(lambda: _written(live, account["account_id"], ids) == ids, WRITTEN_SECONDS, "the usage let go")

        # gone, and not yet started again (its arbiter stopped): the worker writes its own files
        os.kill(arbiter, signal.SIGSTOP)
        try:
            os.kill(drainer, signal.SIGKILL)
            wait_for(lambda: not host_drain.present(folder), 10, "the dead drainer's lock dropped")
            ids = _calls(port, account["key"])
            wait_for(lambda: _written(live, account["account_id"], ids) == ids, WRITTEN_SECONDS,
                     "the usage written by the worker itself")
        finally:
            os.kill(arbiter, signal.SIGCONT)
        wait_for(lambda: (_arbiter_and_drainer(web.pid) or (0, drainer))[1] != drainer, 30, "a new drainer")
        wait_for(lambda: host_drain.present(folder), 30, "the new drainer holding the lock")

        # a SIGTERM right after the calls: the worker writes what it holds before it exits
        ids = _calls(port, account["key"])
        os.kill(web.pid, signal.SIGTERM)
        assert web.proc.wait(timeout=40) == 0, web.tail()
        assert _waiting(folder) == [], "left on the disk for a next start"
        assert _written(live, account["account_id"], ids) == ids
        assert "Traceback" not in web.tail(400), web.tail(400)
    finally:
        web.kill()
