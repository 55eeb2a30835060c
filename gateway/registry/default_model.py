"""The default model: chosen by itself when the first chat models appear, never over the operator.

A routine without a model, the native chat and every bare name no server has need a default
(gateway/registry/routing.py); an installation whose operator added one server and never opened
the Models page had none, and its first routine run failed. So whenever chat models are written
by a path an operator uses (a model saved in the console, `applyconfig`, a server's discovery),
and no model is the default yet, the first of them (by id: the first that appeared) becomes it.
A default that exists is never replaced here: only the operator changes it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import IntegrityError, transaction

from gateway.models import Model

log = logging.getLogger("gateway.registry")


def default_model() -> Model | None:
    return Model.objects.select_related("server").filter(is_default=True).first()


def choose_default(candidates: Iterable[Model] | None) -> Model | None:
    """Make the first enabled chat model of `candidates` the default when there is none; the
    model chosen, or None when nothing changed. Saved with `save()` so the registry hears of it.
    Two writers choosing at once: the unique constraint keeps one, the other gives way."""
    ids = [m.pk for m in candidates or () if m.pk is not None]
    if not ids or Model.objects.filter(is_default=True).exists():
        return None
    chosen = (Model.objects.select_related("server")
              .filter(pk__in=ids, enabled=True, supports_chat=True).order_by("id").first())
    if chosen is None:
        return None
    chosen.is_default = True
    try:
        with transaction.atomic():
            chosen.save(update_fields=["is_default"])
    except IntegrityError:  # another writer chose one meanwhile: theirs stands
        return None
    log.info("default model chosen automatically: %s (the first chat model)", chosen.public_id)
    return chosen


def chosen_text(public_id: str) -> str:
    """What the console says of a default chosen here (on the Models page, and after a server's discovery)."""
    return (f"{public_id} is now the default model, chosen automatically as the first chat model. "
            "Change it on the Models page.")
