"""The end of a run, told once it is written: one log line (run id, routine, trigger, outcome,
duration, error) and the run metrics (gateway/telemetry/metrics.py). Under JSON logs the line carries the
request id of the request that queued the run (gateway/telemetry/logjson.py, gateway/celery.py)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from gateway.telemetry import metrics

log = logging.getLogger("routines.runs")


def run_ended(run, *, status: str, error: str, finished_at: datetime) -> None:
    """Called where the run's end is written, inside that write's transaction: told when it
    commits, so that a write retried after a failure is told once."""
    started_at = run.started_at
    seconds = (finished_at - started_at).total_seconds() if started_at is not None else None
    fields = {"event": "run_ended", "run_id": run.pk, "routine_id": run.routine_id, "trigger": run.trigger,
              "outcome": status, "duration_ms": round(seconds * 1000, 1) if seconds is not None else None}
    if error:
        fields["error"] = error

    def tell() -> None:
        metrics.routine_run_ended(status, seconds)
        log.info("run %s of routine %s %s%s", run.pk, run.routine_id, status, f": {error}" if error else "",
                 extra={"fields": fields})

    transaction.on_commit(tell)
