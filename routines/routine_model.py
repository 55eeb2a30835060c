"""Which model a routine runs with, and what is said when it has none.

A routine names a model, or runs with the installation's default (gateway/registry/default_model.py).
Spec 4.5 requires only `name`, `prompt` and `delivery_targets`, so a routine without a model is
created even while no default exists; it cannot run then, and its record (`model_note`), its
console page, the console's home and its failed run say so, with the cure. The console picks a
routine's model from those its owner's group may use, as the API checks it (routing.plan_chain).
"""

from __future__ import annotations

from gateway.registry.routing import group_may_use, plan_chain, usable_aliases, usable_targets
from gateway.registry.snapshot import registry
from gateway.web.errors import ApiError
from routines.models import Routine

CURE = ("Set the routine's model (console: the routine's page, field Model; API: PUT /api/v1/routines/{id} "
        "with \"model\"), or make a chat model the default (console: Models, tick \"Is default\").")


def model_note(routine: Routine) -> str | None:
    """None when the routine has a model to run with (its own, the default, or none needed);
    otherwise why not, and the cure."""
    if not routine.uses_ai or routine.model:
        return None
    reg = registry()
    default = reg.default
    if default is None:
        return "No model to run with: this routine names no model and no default model is set. " + \
            CURE.format(id=routine.pk)
    if "chat" not in default.capabilities or not group_may_use(routine.account.group, default, reg):
        return (f"No model to run with: this routine names no model and the default model ({default.public_id}) "
                "is not allowed to its owner's account group. " + CURE.format(id=routine.pk))
    return None


def model_choices(account) -> list[tuple[str, str]]:
    """The chat models and aliases the account's group may use, as (value, label) for a picker."""
    group = account.group
    choices = [(t.public_id, t.public_id) for t in usable_targets(group, capability="chat")]
    choices += [(pool.name, f"{pool.name} (alias)") for pool in usable_aliases(group)]
    return choices


def default_label(account) -> str:
    """The picker's empty choice: which model "none" means for this owner."""
    default = registry().default
    if default is None:
        return "None: the default model (no default model is set, so the routine cannot run)"
    if "chat" not in default.capabilities or not group_may_use(account.group, default, registry()):
        return f"None: the default model ({default.public_id}, not allowed to this owner: it cannot run)"
    return f"None: the default model ({default.public_id})"


def model_errors(account, model_id: str) -> list[str]:
    """Why `model_id` may not be the model of a routine of `account` (the API's own words for a
    call with it: unknown, not a chat model, not allowed to the group); [] when it may."""
    try:
        plan_chain(model_id, group=account.group)
    except ApiError as exc:
        return [exc.message]
    return []
