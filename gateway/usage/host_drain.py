"""The host's drainer: one process of a host that writes the spools of the others to the database.

A web worker that wrote its own spools (gateway/usage/writer.py, gateway/usage/call_log.py) would spend
about 12 ms of CPU a second on it at a steady load, 8 of them holding the GIL its event loop needs: the
calls that arrive during a cycle wait for it, and make the most of the p99 at concurrency 1
(docs/decisions/0140-host-drainer.md). So when a drainer runs on the host, a process's periodic cycle
only lets its files go (`Spool.release`: four system calls a file) and the drainer takes them over and
writes them, in a process of its own. Under gunicorn (the Procfile's `web`) the drainer is gunicorn's dirty worker
(gateway/gunicorn_conf.py `SpoolDrainer`), started, watched and restarted by gunicorn's own arbiter.

Whether one runs is the drainer's lock: it holds an exclusive `flock` on DRAINER_LOCK in the usage
spool's folder for as long as it lives, and the kernel drops it when it dies, however it dies. A
process about to let its files go first looks whether the lock is held (`present`: an open, a
non-blocking shared `flock`, a close); when it is not (no drainer, or the drainer is gone or
restarting), the process writes its files itself, as every process without one does (bare uvicorn,
`bin/serve`, the Celery worker, the tests). Nothing is lost either way: a file let go waits on disk,
locked by no one, for the drainer or for the next process's scan of files left by others (`take_over`).
A process's write at exit writes its own files and takes over those it let go, whoever drains.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

DRAINER_LOCK = "drainer.lock"


def present(directory: Path) -> bool:
    """Whether a drainer holds the lock of this spool folder now."""
    try:
        fd = os.open(directory / DRAINER_LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no drainer ever ran on this folder
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # a shared lock taken goes with it
    return False


class DrainerLock:
    """The lock a drainer holds on its spool folder (the folder may change in tests: `hold` follows it)."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._directory: Path | None = None

    def hold(self, directory: Path) -> bool:
        """Hold the lock of `directory` (letting go of another folder's). True when this process holds it:
        False while another drainer of the host does, which this one then only helps."""
        if self._fd is not None and self._directory == directory:
            return True
        self.let_go()
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / DRAINER_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd, self._directory = fd, directory
        return True

    def let_go(self) -> None:
        """Drop the lock (in a forked child, only the child's copy of the descriptor: the parent keeps it)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = self._directory = None
