"""How a failed run is worded, and how its owner is told when failures switch the routine off.
A run records the model or models it tried and the failure as it was: each model of
an exhausted chain with its own status and words (gateway/calls/dispatch.py `ChainExhausted.tried`), the
model that refused, or the model asked for when a quota or a permission refused it before any call.
Not the API's "retry in N seconds": that is for a client, who retries; nothing retries a run by itself."""

from __future__ import annotations

from gateway.calls.chain import ChainExhausted, ModelRefused
from gateway.web.errors import ApiError

NOT_RETRIED = "This run is not tried again by itself: run the routine again (Run now) once the model answers."
MODELS_CHARS = 300  # Run.model's length


def failure_text(exc: ApiError) -> str:
    """A failed model call in a run's words: the status and what happened, each model of an exhausted
    chain with its own failure. Not the API's "retry in N seconds": nothing retries a run
    by itself, so the run says so."""
    if isinstance(exc, ChainExhausted) and exc.tried:
        each = "; ".join(f"{model}: {failure.status} {failure.message}" for model, failure in exc.tried)
        return f"{exc.status}: No model of the chain answered ({each}). {NOT_RETRIED}"
    if isinstance(exc, ChainExhausted):
        return f"{exc.status}: {exc.message.split('; retry in')[0].rstrip('.')}. {NOT_RETRIED}"
    return f"{exc.status}: {exc.message}"


def models_tried(exc: ApiError, asked: str) -> str:
    """The model(s) a failed run tried: each of an exhausted chain, the one that refused, or else the
    one it asked for (a quota or a permission refused it before any call)."""
    if isinstance(exc, ChainExhausted) and exc.tried:
        return ", ".join(model for model, _failure in exc.tried)[:MODELS_CHARS]
    if isinstance(exc, ModelRefused) and exc.model:
        return exc.model
    return asked


def switched_off_notice(routine, run, limit: int) -> tuple[str, str]:
    """The inbox message's title and body when `run` was the last of `limit` failures in a row (spec 3.3)."""
    return (f"Routine “{routine.name}” was switched off",
            f"Its last {limit} runs failed in a row, so it was switched off and starts no run until it is "
            f"enabled again. The last one, run {run.pk}, failed with: {run.error}\n\nLook at its runs "
            f"(GET /api/v1/routines/{routine.pk}/runs), fix the cause, and enable it again.")
