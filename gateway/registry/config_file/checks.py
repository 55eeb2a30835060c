"""Reading the operator's file and checking its values: every mistake is a `ConfigError` naming its
place in the file (`servers[1].models[0].fallbacks[0]`). Shared by the sections' writers
(gateway/registry/config_file/apply.py, aliases.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import yaml
from django.core.exceptions import ValidationError

from gateway.models import Model


class ConfigError(Exception):
    """A mistake in the file; `where` is its place, such as `servers[0].models[2].name`."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where


@dataclass
class Tally:
    created: int = 0
    updated: int = 0
    unchanged: int = 0

    def add(self, status: str) -> None:
        setattr(self, status, getattr(self, status) + 1)

    def __str__(self) -> str:
        parts = [f"{n} {status}" for status, n in vars(self).items() if n]
        return ", ".join(parts) or "none in the file"


# ---------------------------------------------------------------------------------------- reading


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (the last would win silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str, top_keys: tuple[str, ...]) -> dict:
    """The file's content as a mapping; an empty file is an empty mapping."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("", f"cannot read {path}: {exc}") from None
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(where, f"invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("", "the file must be a mapping with the keys " + ", ".join(top_keys))
    return data


# ---------------------------------------------------------------------------------------- checks


def mapping(value, where: str, keys: tuple[str, ...]) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(where, "must be a mapping")
    for key in value:
        if key not in keys:
            raise ConfigError(f"{where}.{key}" if where else str(key),
                              f"unknown key; expected one of {', '.join(keys)}")
    return value


def list_of(value, where: str) -> list:
    if not isinstance(value, list):
        raise ConfigError(where, "must be a list")
    return value


def string(value, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(where, "must be a non-empty string (quote it if it looks like a number)")
    return value.strip()


def boolean(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(where, "must be true or false")
    return value


def whole(value, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(where, f"must be a whole number of at least {minimum}")
    return value


def seconds(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(where, "must be a number of seconds")
    return float(value)


# of a model and an alias deployment
PRICE_KEYS = ("input_price", "cached_input_price", "cache_write_price", "output_price")
MONEY_PLACES = 4  # as the database keeps prices and budgets (gateway/registry/prices.py)
PRICE_BELOW = 10**8  # a price has 12 digits, 4 of them decimals
BUDGET_BELOW = 10**10  # a budget 14


def price(value, where: str) -> Decimal | None:
    """A price per million tokens: a number or a decimal string, at least 0, at most 4 decimals;
    null (or left out) is no price."""
    if value is None:
        return None
    amount = _amount(value)
    if amount is None or amount < 0 or amount >= PRICE_BELOW:
        raise ConfigError(where, f"must be a price of at least 0 and below {PRICE_BELOW} with at most {MONEY_PLACES} "
                                 "decimals, as a number or a decimal string (0.15, \"0.15\"), or null for none")
    return amount


BATCH_DISCOUNT = "batch_discount_percent"  # of a model and an alias deployment (gateway/registry/prices.py)


def percent(value, where: str) -> int:
    """A whole percentage, 0 to 100 (a batch discount)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise ConfigError(where, "must be a whole number of percent from 0 to 100")
    return value


def budget(value, where: str) -> Decimal:
    """A budget in the currency: -1 (none), or a number or decimal string of at least 0, at most 4
    decimals."""
    amount = _amount(value)
    if amount is None or (amount < 0 and amount != -1) or amount >= BUDGET_BELOW:
        raise ConfigError(where, f"must be -1 (no budget) or an amount of at least 0 and below {BUDGET_BELOW} "
                                 f"with at most {MONEY_PLACES} decimals, as a number or a decimal string "
                                 "(25.5, \"25.50\")")
    return amount


def _amount(value) -> Decimal | None:
    """An exact amount of YAML's number or string, with MONEY_PLACES decimals; None when it is
    neither, is not finite or has more decimals (other than zeros). A float is read as written
    (0.15 is 0.15, not its binary neighbour)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    try:
        amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value.strip())
    except (AttributeError, InvalidOperation):
        return None
    if not amount.is_finite() or -min(amount.normalize().as_tuple().exponent, 0) > MONEY_PLACES:
        return None
    return amount.quantize(Decimal(1).scaleb(-MONEY_PLACES))  # as stored: "0.15000" has 5 places, 0.1500 4


def choice(value, where: str, choices: list[str], what: str) -> str:
    if value not in choices:
        raise ConfigError(where, f"bad {what} {value!r}; expected one of {', '.join(choices)}")
    return value


def default_of(model, name: str):
    return model._meta.get_field(name).get_default()


def names_once(entries: list, where: str, what: str) -> None:
    seen = set()
    for i, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name.strip() in seen:
            raise ConfigError(f"{where}[{i}].name", f"{what} {name.strip()!r} is listed twice")
        if isinstance(name, str):
            seen.add(name.strip())


def from_env(entry: dict, key: str, where: str, environ: Mapping[str, str]) -> str:
    """The value of the environment variable `entry[key]` names (a secret the file does not hold)."""
    variable = string(entry[key], f"{where}.{key}")
    if variable not in environ:
        raise ConfigError(f"{where}.{key}", f"environment variable {variable} is not set")
    if not environ[variable]:
        raise ConfigError(f"{where}.{key}", f"environment variable {variable} is empty")
    return environ[variable]


# ---------------------------------------------------------------------------------------- writing


def save(obj, wanted: dict, where: str, key_of: Mapping[str, str]) -> str:
    """Sets `wanted` on `obj` and saves it when anything differs; returns created/updated/unchanged."""
    status = "created" if obj.pk is None else "updated"
    if status == "updated" and all(getattr(obj, name) == value for name, value in wanted.items()):
        return "unchanged"
    for name, value in wanted.items():
        setattr(obj, name, value)
    try:
        obj.full_clean()
    except ValidationError as exc:
        name, messages = next(iter(exc.message_dict.items()))
        place = key_of.get(name, name)
        raise ConfigError(f"{where}.{place}" if place != "__all__" else where, " ".join(messages)) from None
    obj.save()
    return status


class KnownModels:
    """`server/model` ids → Model rows, from the database as written so far in this transaction."""

    def __init__(self):
        self._rows: dict[str, Model | None] = {}

    def get(self, model_id, where: str) -> Model:
        model_id = string(model_id, where)
        if model_id not in self._rows:
            server_name, sep, name = model_id.partition("/")
            row = Model.objects.select_related("server").filter(server__name=server_name, name=name).first()
            self._rows[model_id] = row if sep else None
        row = self._rows[model_id]
        if row is None:
            raise ConfigError(where, f"unknown model {model_id} (write it as server/model)")
        return row
