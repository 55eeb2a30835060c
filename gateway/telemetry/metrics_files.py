"""The multiprocess metrics folder: what is done with a process's files when it ends.

Each process writes files named `<type>_<pid>.db` (a gauge: `gauge_<mode>_<pid>.db`). When a
process ends, `mark_dead(pid)` removes its live gauges (`gateway_processes` would count it as
alive otherwise); its counters and histograms stay, so that the sums a scrape reads never go back
(Prometheus would take a fall for a restart). They are removed when the whole service starts
again (`prune`, before the first process forks), only those of processes that are gone: the web
server and the Celery worker may share the folder, and each starts on its own.

Who calls what:
- gunicorn (the Procfile's `web`, gateway/gunicorn_conf.py): `prune` in the master at start,
  `mark_dead` in the master when a worker exits (`child_exit`), however it died;
- uvicorn alone (bin/serve): `prune` by `python -m gateway.telemetry.metrics_files` before it starts,
  `mark_dead` of its own pid at the ASGI lifespan's shutdown (`lifespan`);
- Celery (gateway/celery.py): `prune` in the main process at start, `mark_dead` by each pool
  process when it ends and by the main process when the worker stops.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

FILE_NAME = re.compile(r"^(?:counter|histogram|summary|gauge_[a-z]+)_(\d+)\.db$")


def metrics_dir() -> Path:
    from django.conf import settings

    return Path(settings.PROMETHEUS_MULTIPROC_DIR)


def mark_dead(pid: int) -> None:
    """Forget the live gauges of a process that ended. Never raises."""
    from prometheus_client import multiprocess

    try:
        multiprocess.mark_process_dead(pid, str(metrics_dir()))
    except OSError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def prune(directory: Path | None = None) -> int:
    """Remove the files of processes that are gone (from a previous run of the service); the
    files of live processes stay. Returns how many were removed."""
    directory = Path(directory or metrics_dir())
    directory.mkdir(parents=True, exist_ok=True)
    removed = 0
    for path in directory.iterdir():
        match = FILE_NAME.match(path.name)
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:
            pass
    return removed


async def lifespan(receive, send) -> None:
    """The ASGI lifespan protocol: nothing to do at startup; at shutdown this process's live
    gauges are removed (uvicorn serving alone has no master to do it)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            mark_dead(os.getpid())
            await send({"type": "lifespan.shutdown.complete"})
            return


if __name__ == "__main__":  # bin/serve, before its processes start
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    django.setup()
    prune()
