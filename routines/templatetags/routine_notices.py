"""The console home's line on the default model: which it is, or that there is none, and how many
routines have no model to run with (routines/routine_model.py). A tag, so the home's template
takes it with one include and its page's context is not touched."""

from __future__ import annotations

from django import template

from gateway.registry.routing import group_may_use
from gateway.registry.snapshot import registry
from routines.models import Routine

register = template.Library()


@register.simple_tag(takes_context=True)
def default_model_notice(context) -> dict | None:
    """None for staff who may not view routines; else the default's id (or None) and the count of
    routines that cannot run for want of a model."""
    request = context.get("request")
    if request is None or not request.user.has_perm("routines.view_routine"):
        return None
    reg = registry()
    default = reg.default
    unnamed = Routine.objects.filter(uses_ai=True, model="")
    if default is None:
        stuck = unnamed.count()
    else:
        groups = {g.pk: g for g in _groups(unnamed)}
        barred = [pk for pk, group in groups.items()
                  if "chat" not in default.capabilities or not group_may_use(group, default, reg)]
        stuck = unnamed.filter(account__group_id__in=barred).count() if barred else 0
    return {"default": default.public_id if default else None, "stuck": stuck}


def _groups(routines):
    from accounts.models import AccountGroup

    return AccountGroup.objects.filter(accounts__routines__in=routines).distinct()
