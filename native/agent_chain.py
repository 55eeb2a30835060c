"""Which models an agent request (agent chat and run, the MCP `chat` tool) may go to."""

from __future__ import annotations

from typing import Any

from gateway.calls.plan import call_plan
from gateway.registry.snapshot import Target, registry
from gateway.web.errors import ApiError


def agent_chain(*, account, model_id: Any, quota_used=None) -> list[Target]:
    """The chain of the named model (none named: the default model). Unlike /v1, a name no
    model has is not answered by the default: it is 400 (spec 7.2), and so is a server that
    does not exist. Then the group's limits and the token quota (403)."""
    reg = registry()
    if model_id is None:
        if reg.default is None:
            raise ApiError(400, "No model was named and no default model is configured.", code="model_not_found")
        model_id = reg.default.public_id
    elif not isinstance(model_id, str) or not model_id:
        raise ApiError(400, "'model' must be the name of a model.", code="invalid_request_error")
    elif model_id not in reg.by_public_id and model_id not in reg.by_name:
        server, sep, _name = model_id.partition("/")
        if sep and server not in reg.server_names:
            raise ApiError(400, f"The model '{model_id}' does not exist: no model server is named '{server}'.",
                           code="model_not_found")
        raise ApiError(400, f"The model '{model_id}' does not exist.", code="model_not_found")
    return call_plan(account=account, model_id=model_id, quota_used=quota_used)
