"""What a reply that stopped midway becomes, the same on every surface (spec 6.2, 7.2): the status,
the error code and the words. Each surface puts them in its own shape (an OpenAI-style error, an
Anthropic `error` event, native chat's `error` event, an agent's or a routine run's failure), with
what had arrived as `partial` where the surface carries it."""

from __future__ import annotations

from typing import Any

from gateway.upstream.providers.base import StreamCut
from gateway.web.errors import ApiError

READ_TIMEOUT = "read_timeout"  # the model stopped answering: 504
UPSTREAM_ERROR = "upstream_error"  # the server reported an error, or sent what is not a reply: 502
DISCONNECTED = "disconnected"  # the connection closed mid-reply: 502
GUARDED = "content_policy_violation"  # an output check of the group's guardrails stopped it: 400


def cut_error(cut: StreamCut, partial: Any = None) -> ApiError:
    """The error of a reply cut by `cut`; `partial`, when given, is what had arrived. A reply an
    output check stopped is a refusal like an input check's, without what had been let through."""
    if cut.reason == GUARDED:
        return ApiError(400, cut.message, code=GUARDED)
    if cut.reason == READ_TIMEOUT:
        error = ApiError(504, "The model stopped answering mid-reply.", code="read_timeout")
    elif cut.reason == UPSTREAM_ERROR:
        error = ApiError(502, f"The model server failed mid-reply: {cut.message}", code="upstream_error")
    else:
        error = ApiError(502, "The model server closed the connection mid-reply.", code="upstream_disconnected")
    if partial is not None:
        error.extra["partial"] = partial
    return error
