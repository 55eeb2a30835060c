"""`inapp`: a message in the routine owner's inbox (GET /api/v1/inbox)."""

from __future__ import annotations

from routines.inbox import notify


def send(run, target: str, text: str) -> None:
    routine = run.routine
    notify(routine.account, routine.name, text, routine=routine, run=run)
