"""Creating, changing, deleting routines and rotating their token and secret (spec 4.5, 4.8).

Every write validates the whole routine as it would be after the change, and answers a
validation failure with 422 `{message, errors: {field: [message]}}`."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from rest_framework import serializers

from accounts.models import Account
from gateway.web.errors import ApiError, ValidationFailed
from gateway.web.validation import StrictCharField
from routines.models import Routine, Run
from routines.routine_model import model_errors
from routines.run_start import start_manual_run
from routines.schedules import routine_next_run, schedule_errors
from routines.targets import target_errors

TOKEN_BYTES = 24  # 48 hex characters (spec 2.4)
SECRET_BYTES = 32  # 64 hex characters (spec 4.5)
UNSIGNED_WARNING = ("This webhook is unsigned: anyone who knows its URL can start the routine. "
                    "Rotate the secret (POST .../rotate-secret) to require a signature.")


class StrictBooleanField(serializers.BooleanField):
    """true or false only (DRF's BooleanField would take "yes", 1 or "on")."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class RoutineInput(serializers.Serializer):
    name = StrictCharField(max_length=120)
    prompt = StrictCharField(max_length=8000, trim_whitespace=False)
    trigger = serializers.ChoiceField(choices=Routine.Trigger.values, required=False)
    delivery_targets = serializers.JSONField()
    uses_ai = StrictBooleanField(required=False)
    is_enabled = StrictBooleanField(required=False)
    webhook_secret = StrictCharField(max_length=128, allow_null=True, required=False, trim_whitespace=False)
    # beyond the spec: "standard" signs id and timestamp with the body (Standard Webhooks), see docs/webhooks.md
    webhook_signature_scheme = serializers.ChoiceField(choices=Routine.SignatureScheme.values, required=False)
    # "" or null: no schedule (a `schedule` routine without one runs by run-now; records.NO_SCHEDULE)
    schedule = StrictCharField(max_length=120, allow_blank=True, allow_null=True, required=False)
    timezone = StrictCharField(max_length=64, required=False)
    model = StrictCharField(max_length=300, allow_null=True, allow_blank=True, required=False)

    def validate_prompt(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("This field may not be blank.")
        return value


@dataclass
class Written:
    routine: Routine
    secret_shown: str | None = None  # a generated secret, returned once


def new_token() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def new_secret() -> str:
    return secrets.token_hex(SECRET_BYTES)


def routine_create(*, account: Account, data: dict[str, Any]) -> Written:
    fields = _validated(account, data, current=None)
    with transaction.atomic():
        Account.objects.select_for_update().filter(pk=account.pk).first()  # one create at a time per account
        if Routine.objects.filter(account=account).count() >= settings.ROUTINES_PER_ACCOUNT:
            raise ApiError(403, f"You have reached the limit of {settings.ROUTINES_PER_ACCOUNT} routines. "
                                "Delete one before creating another.", code="routine_limit")
        shown = None
        if "webhook_secret" not in data:
            shown = fields["webhook_secret"] = new_secret()
        routine = Routine(account=account, webhook_token=new_token(), **fields)
        if not routine.is_enabled:
            routine.disabled_reason = Routine.DisabledReason.USER
        routine.next_run_at = routine_next_run(routine)
        routine.save()
    return Written(routine, shown)


def routine_update(*, routine: Routine, data: dict[str, Any]) -> Written:
    fields = _validated(routine.account, data, current=routine)
    with transaction.atomic():
        # The row as it is now, locked: a worker (failures, pause) or the beat tick (next_run_at)
        # may have written it since it was read, and only what this change touches is saved.
        routine = Routine.objects.select_for_update().filter(pk=routine.pk).first()
        if routine is None:
            raise ApiError(404, "Routine not found.", code="not_found")
        was_enabled = routine.is_enabled
        schedule_before = (routine.trigger, routine.schedule, routine.timezone)
        for name, value in fields.items():
            setattr(routine, name, value)
        changed = {*fields, "updated_at"}
        if "is_enabled" in fields:
            if routine.is_enabled and not was_enabled:
                routine.consecutive_failures = 0
                routine.disabled_reason = ""
                changed |= {"consecutive_failures", "disabled_reason"}
            elif not routine.is_enabled and was_enabled:
                routine.disabled_reason = Routine.DisabledReason.USER
                changed.add("disabled_reason")
        if (routine.trigger, routine.schedule, routine.timezone) != schedule_before or (
                routine.is_enabled and not was_enabled):
            routine.next_run_at = routine_next_run(routine)
            changed.add("next_run_at")
        routine.save(update_fields=sorted(changed))
    return Written(routine)


def routine_delete(*, routine: Routine) -> None:
    routine.delete()


def routine_rotate_token(*, routine: Routine) -> Routine:
    routine.webhook_token = new_token()
    routine.save(update_fields=["webhook_token", "updated_at"])
    return routine


def routine_rotate_secret(*, routine: Routine) -> str:
    secret = new_secret()
    routine.webhook_secret = secret
    routine.save(update_fields=["webhook_secret", "updated_at"])
    return secret


def routine_run_now(*, routine: Routine) -> Run:
    if not routine.is_enabled:
        raise ValidationFailed({"is_enabled": ["The routine is paused: enable it before running it."]},
                               "The routine is paused: enable it before running it.")
    return start_manual_run(routine)


def routine_for(*, account: Account, routine_id: int) -> Routine:
    """The caller's routine; another account's, or none, is 404."""
    routine = Routine.objects.filter(pk=routine_id, account=account).first()
    if routine is None:
        raise ApiError(404, "Routine not found.", code="not_found")
    return routine


def _validated(account: Account, data: dict[str, Any], *, current: Routine | None) -> dict[str, Any]:
    """The fields to write. On update (`current`), only the fields sent, checked together with
    the routine's other fields."""
    serializer = RoutineInput(data=data, partial=current is not None)
    errors: dict[str, list[str]] = {}
    if not serializer.is_valid():
        errors = {field: [str(m) for m in messages] for field, messages in serializer.errors.items()}
    if not errors:
        fields = dict(serializer.validated_data)
    else:  # the valid fields, as validated (never the raw values: a `schedule` of 5 is no text)
        fields = {name: field.run_validation(data[name]) for name, field in serializer.fields.items()
                  if name in data and name not in errors}
    if "schedule" in fields:  # null and blanks are no schedule; runs of spaces are one
        fields["schedule"] = " ".join((fields["schedule"] or "").split())
    merged = {
        "trigger": (current.trigger if current else Routine.Trigger.SCHEDULE),
        "schedule": current.schedule if current else "",
        "timezone": current.timezone if current else "UTC",
        **{k: fields[k] for k in ("trigger", "schedule", "timezone") if k in fields},
    }
    if "delivery_targets" in fields and "delivery_targets" not in errors:
        problems = target_errors(account, fields["delivery_targets"])
        if problems:
            errors["delivery_targets"] = problems
    if not errors.keys() & {"trigger", "schedule", "timezone"}:
        errors.update(_schedule_errors(merged))
    if fields.get("model") and "model" not in errors and (problems := model_errors(account, fields["model"])):
        errors["model"] = problems
    if errors:
        first = next(iter(errors.values()))[0]
        total = sum(len(m) for m in errors.values())
        raise ValidationFailed(errors, first if total == 1 else f"{first} (and {total - 1} more error"
                                                                 f"{'s' if total > 2 else ''})")
    if "model" in fields:
        fields["model"] = fields["model"] or ""
    return fields


def _schedule_errors(merged: dict[str, str]) -> dict[str, list[str]]:
    """The time zone must be a known one, and a schedule that is sent to a `schedule` routine a
    valid 5-field cron. No schedule is no error: spec 4.5 requires only `name`, `prompt` and
    `delivery_targets`, with `schedule` the default trigger; such a routine is created, the beat
    never starts it, and its record says so (records.NO_SCHEDULE,
    docs/decisions/0061-schedule-routine-without-schedule.md)."""
    zone_problem = schedule_errors("* * * * *", merged["timezone"])
    errors: dict[str, list[str]] = {"timezone": zone_problem} if zone_problem else {}
    if merged["trigger"] != Routine.Trigger.SCHEDULE or not merged["schedule"]:
        return errors
    problems = [p for p in schedule_errors(merged["schedule"], merged["timezone"]) if p not in zone_problem]
    if problems:
        errors["schedule"] = problems
    return errors
