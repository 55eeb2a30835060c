"""The file's `aliases` section and a group's `allowed_aliases` (docs/configuration.md):

    aliases:
      - name: llama
        policy: least-busy          # weighted (the default), least-busy, latency
        affinity: session           # none (the default), session, user
        deployments:
          - {model: gpu1/llama3.1:8b, weight: 3}
          - model: gpu2/llama3.1:8b # weight 1
            input_price: 0.05       # its own prices, per million tokens; each left out is the model's
            batch_discount_percent: 40  # its own batch discount; left out: the model's
        fallbacks: [cloud/gpt-4o-mini]

As for every object the file names, it is authoritative for an alias: its deployments and
fallbacks are the ones listed, in order, and a field left out takes its default. Aliases are
written after the servers and their models (a deployment names a model of the file or of the
database) and before the groups (which may allow them).
"""

from __future__ import annotations

from gateway.models import Alias, AliasDeployment, AliasFallback
from gateway.registry.config_file.checks import (
    BATCH_DISCOUNT,
    PRICE_KEYS,
    ConfigError,
    KnownModels,
    Tally,
    boolean,
    choice,
    default_of,
    list_of,
    mapping,
    names_once,
    percent,
    price,
    save,
    string,
    whole,
)

ALIAS_KEYS = ("name", "policy", "affinity", "enabled", "deployments", "fallbacks")
DEPLOYMENT_KEYS = ("model", "weight", *PRICE_KEYS, BATCH_DISCOUNT)


def apply_aliases(entries, known: KnownModels) -> Tally:
    """Creates or updates each alias of the section; how many were created, updated, unchanged."""
    entries = list_of(entries, "aliases")
    names_once(entries, "aliases", "alias")
    tally = Tally()
    for i, entry in enumerate(entries):
        tally.add(_apply_alias(entry, f"aliases[{i}]", known))
    return tally


def _apply_alias(entry, where: str, known: KnownModels) -> str:
    entry = mapping(entry, where, ALIAS_KEYS)
    if "name" not in entry:
        raise ConfigError(where, "an alias needs a name")
    if "deployments" not in entry:
        raise ConfigError(where, "an alias needs deployments")
    name = string(entry["name"], f"{where}.name")
    wanted = {
        "policy": choice(entry.get("policy", default_of(Alias, "policy")), f"{where}.policy",
                         Alias.Policy.values, "policy"),
        "affinity": choice(entry.get("affinity", default_of(Alias, "affinity")), f"{where}.affinity",
                           Alias.Affinity.values, "affinity"),
        "enabled": boolean(entry.get("enabled", default_of(Alias, "enabled")), f"{where}.enabled"),
    }
    deployments = _deployments(entry["deployments"], f"{where}.deployments", known)
    fallbacks = _fallbacks(entry.get("fallbacks", []), f"{where}.fallbacks", known)

    alias = Alias.objects.filter(name=name).first() or Alias(name=name)
    status = save(alias, wanted, where, {})
    current = list(AliasDeployment.objects.filter(alias=alias).order_by("id")
                   .values_list("model_id", "weight", *PRICE_KEYS, BATCH_DISCOUNT))
    if current != deployments:
        for row in AliasDeployment.objects.filter(alias=alias):  # one by one, so the registry hears of it
            row.delete()
        for model_id, weight, *prices, discount in deployments:
            AliasDeployment.objects.create(alias=alias, model_id=model_id, weight=weight,
                                           **dict(zip(PRICE_KEYS, prices, strict=True)), **{BATCH_DISCOUNT: discount})
        status = "updated" if status == "unchanged" else status
    links = AliasFallback.objects.filter(alias=alias).order_by("position", "id")
    if list(links.values_list("fallback_id", flat=True)) != fallbacks:
        for link in links:
            link.delete()
        for position, model_id in enumerate(fallbacks):
            AliasFallback.objects.create(alias=alias, fallback_id=model_id, position=position)
        status = "updated" if status == "unchanged" else status
    return status


def _deployments(entries, where: str, known: KnownModels) -> list[tuple]:
    """(model id, weight, each price of PRICE_KEYS, then the batch discount) of each deployment, in the file's
    order; a deployment may be written as its model id alone (weight 1, the model's prices and discount)."""
    found: list[tuple] = []
    for i, entry in enumerate(list_of(entries, where)):
        place = f"{where}[{i}]"
        if isinstance(entry, str):
            entry = {"model": entry}
        entry = mapping(entry, place, DEPLOYMENT_KEYS)
        if "model" not in entry:
            raise ConfigError(place, "a deployment needs a model")
        model = known.get(entry["model"], f"{place}.model")
        if any(model.pk == row[0] for row in found):
            raise ConfigError(f"{place}.model", f"{model.public_id} is listed twice")
        discount = entry.get(BATCH_DISCOUNT)  # left out or null: the model's
        found.append((model.pk, whole(entry.get("weight", 1), f"{place}.weight", 0),
                      *(price(entry.get(key), f"{place}.{key}") for key in PRICE_KEYS),
                      None if discount is None else percent(discount, f"{place}.{BATCH_DISCOUNT}")))
    if not found:
        raise ConfigError(where, "an alias needs at least one deployment")
    return found


def _fallbacks(entries, where: str, known: KnownModels) -> list[int]:
    found: list[int] = []
    for i, model_id in enumerate(list_of(entries, where)):
        model = known.get(model_id, f"{where}[{i}]")
        if model.pk in found:
            raise ConfigError(f"{where}[{i}]", f"{model.public_id} is listed twice")
        found.append(model.pk)
    return found


def group_aliases(entry: dict, where: str) -> list[int]:
    """The ids of the aliases a group's entry allows (`allowed_aliases`: names of aliases in the
    file or the database); none when the entry has no such key."""
    found: list[int] = []
    for i, name in enumerate(list_of(entry.get("allowed_aliases", []), f"{where}.allowed_aliases")):
        place = f"{where}.allowed_aliases[{i}]"
        alias = Alias.objects.filter(name=string(name, place)).first()
        if alias is None:
            raise ConfigError(place, f"unknown alias {name.strip()}")
        if alias.pk not in found:
            found.append(alias.pk)
    return found
