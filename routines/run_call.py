"""A routine run's model call, metered and in the calls log: its answer is counted once by its key
(`run-<pk>`, the usage record's), and the call is a row of the calls log of its own (surface `routine`,
tagged with the routine and the run: gateway/usage/call_log.py `own_call`), answered, failed or refused,
so that the Calls list, the home and the usage console count it like any call."""

from __future__ import annotations

import logging
from collections.abc import Callable

from gateway.calls.completion import Completion
from gateway.calls.cuts import GUARDED, cut_error
from gateway.calls.metering import meter
from gateway.usage.call_log import cut_midway, own_call

log = logging.getLogger(__name__)

SURFACE = "routine"


def usage_key(run_id: int) -> str:
    return f"run-{run_id}"


def logged_call(run, ask: Callable[[], Completion]) -> Completion:
    """`ask()` (the model call) as a call of the calls log, its answer metered inside it (so the row has
    its tokens and cost, and the usage record its tags); what `ask` raises is raised after the row."""
    routine = run.routine
    with own_call(surface=SURFACE, account=routine.account, request_id=usage_key(run.pk),
                  tags={"routine": str(routine.pk), "run": str(run.pk)}) as call:
        completion = ask()
        meter_answer(run, completion)
        if completion.cut is not None:
            cut_midway(call, cut_error(completion.cut).code)
    return completion


def meter_answer(run, completion: Completion) -> None:
    """Count the answer (once, by its key). Never raises: an answered run does not fail, nor
    count toward switching its routine off, because counting failed. An answer the group's
    guardrails stopped is not billed."""
    if completion.cut is not None and completion.cut.reason == GUARDED:
        return
    try:
        usage = completion.usage
        meter(account_id=run.routine.account_id, model=completion.model, surface=SURFACE,
              input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"],
              request_id=usage_key(run.pk), key=usage_key(run.pk), price=completion.target.price,
              cached_input_tokens=completion.cached_input_tokens,
              cache_write_input_tokens=completion.cache_write_input_tokens)
    except Exception:
        log.exception("run %s: its usage could not be metered", run.pk)
