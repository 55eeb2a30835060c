"""The JSON of a routine and of its runs, built here only: the API's answers (routines/views.py)
and the MCP tools (native/tools/builtin.py) show the same fields the same way."""

from __future__ import annotations

from django.conf import settings

from gateway.web.output import timestamp
from routines.models import Routine, Run
from routines.routine_model import model_note

# A `schedule` routine may have no schedule (spec 4.5 requires only name, prompt and targets, and
# `schedule` is the default trigger): the beat never starts it. The record and the console say so.
NO_SCHEDULE = "No schedule: runs only by run-now (or an event at its webhook URL) until a schedule is set."

# what the MCP `list_routines` tool shows of each routine, in this order
SUMMARY_FIELDS = ("id", "name", "trigger", "is_enabled", "disabled_reason", "schedule", "last_run_at",
                  "next_run_at")


def routine_record(routine: Routine, *, with_token: bool = False) -> dict:
    """The routine as the API shows it: never its secret; its token (and the e-mail address
    made of it) only in the answers to create, change and rotate."""
    record = {
        "id": routine.pk,
        "name": routine.name,
        "prompt": routine.prompt,
        "trigger": routine.trigger,
        "delivery_targets": routine.delivery_targets,
        "uses_ai": routine.uses_ai,
        "is_enabled": routine.is_enabled,
        "webhook_assinado": bool(routine.webhook_secret),
        "webhook_signature_scheme": routine.webhook_signature_scheme,
        "schedule": routine.schedule or None,
        "schedule_note": schedule_note(routine),
        "timezone": routine.timezone,
        "model": routine.model or None,
        "model_note": model_note(routine),
        "consecutive_failures": routine.consecutive_failures,
        "disabled_reason": routine.disabled_reason or None,
        "last_run_at": timestamp(routine.last_run_at),
        "next_run_at": timestamp(routine.next_run_at),
        "created_at": timestamp(routine.created_at),
    }
    if with_token:
        record["webhook_token"] = routine.webhook_token
        domain = getattr(settings, "INBOUND_EMAIL_DOMAIN", "")
        record["email_address"] = (f"{routine.webhook_token}@{domain}"
                                   if routine.trigger == Routine.Trigger.EMAIL and domain else None)
    return record


def schedule_note(routine: Routine) -> str | None:
    """NO_SCHEDULE for a `schedule` routine that has no schedule; None for every other routine."""
    if routine.trigger == Routine.Trigger.SCHEDULE and not routine.schedule:
        return NO_SCHEDULE
    return None


def routine_summary(routine: Routine) -> dict:
    """The few fields of `routine_record` an agent needs to pick a routine to start."""
    record = routine_record(routine)
    return {name: record[name] for name in SUMMARY_FIELDS}


def run_record(run: Run) -> dict:
    return {
        "id": run.pk,
        "event_id": run.event_id or None,
        "trigger": run.trigger,
        "status": run.status,
        "output": run.output,
        "error": run.error or None,
        "model": run.model or None,
        "usage": run.usage,
        "retry_of": run.retry_of_id,  # the failed run this one tries again, if any
        "created_at": timestamp(run.created_at),
        "started_at": timestamp(run.started_at),
        "finished_at": timestamp(run.finished_at),
        "deliveries": [
            {"target": d.target, "status": d.status, "attempts": d.attempts, "error": d.error or None}
            for d in run.deliveries.all()
        ],
    }
