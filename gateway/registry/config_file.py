"""The operator's configuration file (`manage.py applyconfig FILE`, docs/configuration.md): model
servers and their models, fallbacks, the default model and account groups, in one YAML file.

Applying is idempotent and all-or-nothing: the whole file is checked and written in one
transaction, and any error names its place in the file (`servers[1].models[0].fallbacks[0]`)
and writes nothing. Objects are matched by name. For an object the file names, the file is
authoritative: a field it leaves out takes its default (a group without `allowed_models` may use
every model; a model without `fallbacks` has none) — except a server's API key, which is kept
when the file gives neither `api_key` nor `api_key_env`. Objects the file does not name are left
alone: applying never deletes anything.

Account groups belong to the accounts app; their model is looked up through the app registry so
that gateway/ still imports no app above it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml
from django.apps import apps
from django.core.exceptions import ValidationError
from django.db import transaction

from gateway.models import Model, ModelFallback, ModelServer

TOP_KEYS = ("servers", "default_model", "groups")
SERVER_KEYS = ("name", "kind", "base_url", "api_key", "api_key_env", "is_remote", "enabled", "connect_timeout",
               "read_timeout", "drop_unsupported_fields", "structured_output", "models")
MIN_CONTEXT_WINDOW = 256  # as the admin allows (gateway.models.Model.context_window)
MODEL_KEYS = ("name", "chat", "embeddings", "audio", "enabled", "context_window", "fallbacks")
GROUP_KEYS = ("name", "api_access", "allowed_models", "daily_tokens", "weekly_tokens", "monthly_tokens",
              "remote_servers_allowed", "attachments_per_message")

# file key → model field, where they differ
MODEL_FIELDS = {"chat": "supports_chat", "embeddings": "supports_embeddings", "audio": "supports_audio"}


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


@dataclass
class Summary:
    servers: Tally = field(default_factory=Tally)
    models: Tally = field(default_factory=Tally)
    groups: Tally = field(default_factory=Tally)
    default_model: tuple[str, str] | None = None  # (public id, "set" or "unchanged")

    @property
    def changed(self) -> bool:
        if self.default_model and self.default_model[1] == "set":
            return True
        return any(t.created or t.updated for t in (self.servers, self.models, self.groups))

    def lines(self) -> list[str]:
        lines = [f"servers: {self.servers}", f"models: {self.models}", f"groups: {self.groups}"]
        if self.default_model:
            lines.append(f"default model: {self.default_model[0]} ({self.default_model[1]})")
        return lines


# ---------------------------------------------------------------------------------------- reading


class _UniqueKeyLoader(yaml.SafeLoader):
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


def read_config(path: str) -> dict:
    """The file's content as a mapping; an empty file is an empty mapping."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("", f"cannot read {path}: {exc}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(where, f"invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("", "the file must be a mapping with the keys " + ", ".join(TOP_KEYS))
    return data


# ---------------------------------------------------------------------------------------- checks


def _mapping(value, where: str, keys: tuple[str, ...]) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(where, "must be a mapping")
    for key in value:
        if key not in keys:
            raise ConfigError(f"{where}.{key}" if where else str(key),
                              f"unknown key; expected one of {', '.join(keys)}")
    return value


def _list(value, where: str) -> list:
    if not isinstance(value, list):
        raise ConfigError(where, "must be a list")
    return value


def _string(value, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(where, "must be a non-empty string (quote it if it looks like a number)")
    return value.strip()


def _bool(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(where, "must be true or false")
    return value


def _int(value, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(where, f"must be a whole number of at least {minimum}")
    return value


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(where, "must be a number of seconds")
    return float(value)


def _default(model, name: str):
    return model._meta.get_field(name).get_default()


def _names_once(entries: list, where: str, what: str) -> None:
    seen = set()
    for i, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name.strip() in seen:
            raise ConfigError(f"{where}[{i}].name", f"{what} {name.strip()!r} is listed twice")
        if isinstance(name, str):
            seen.add(name.strip())


# ---------------------------------------------------------------------------------------- writing


def _save(obj, wanted: dict, where: str, key_of: Mapping[str, str]) -> str:
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


class _Models:
    """`server/model` ids → Model rows, from the database as written so far in this transaction."""

    def __init__(self):
        self._rows: dict[str, Model | None] = {}

    def get(self, model_id, where: str) -> Model:
        model_id = _string(model_id, where)
        if model_id not in self._rows:
            server_name, sep, name = model_id.partition("/")
            row = Model.objects.select_related("server").filter(server__name=server_name, name=name).first()
            self._rows[model_id] = row if sep else None
        row = self._rows[model_id]
        if row is None:
            raise ConfigError(where, f"unknown model {model_id} (write it as server/model)")
        return row


def _apply_server(entry, where: str, environ: Mapping[str, str], summary: Summary) -> list[tuple]:
    """Writes one server and its models; returns (model row, its entry, its place) for the fallbacks."""
    entry = _mapping(entry, where, SERVER_KEYS)
    if "name" not in entry:
        raise ConfigError(where, "a server needs a name")
    if "base_url" not in entry:
        raise ConfigError(where, "a server needs a base_url")
    name = _string(entry["name"], f"{where}.name")
    kind = entry.get("kind", _default(ModelServer, "kind"))
    if kind not in ModelServer.Kind.values:
        raise ConfigError(f"{where}.kind", f"bad kind {kind!r}; expected one of {', '.join(ModelServer.Kind.values)}")
    wanted = {
        "kind": kind,
        "base_url": _string(entry["base_url"], f"{where}.base_url"),
        "is_remote": _bool(entry.get("is_remote", _default(ModelServer, "is_remote")), f"{where}.is_remote"),
        "enabled": _bool(entry.get("enabled", _default(ModelServer, "enabled")), f"{where}.enabled"),
        "drop_unsupported_fields": _bool(entry.get("drop_unsupported_fields",
                                                   _default(ModelServer, "drop_unsupported_fields")),
                                         f"{where}.drop_unsupported_fields"),
    }
    structured = entry.get("structured_output", _default(ModelServer, "structured_output"))
    if structured not in ModelServer.StructuredOutput.values:
        raise ConfigError(f"{where}.structured_output", f"bad structured_output {structured!r}; expected one of "
                          f"{', '.join(ModelServer.StructuredOutput.values)}")
    wanted["structured_output"] = structured
    for timeout in ("connect_timeout", "read_timeout"):
        wanted[timeout] = _number(entry.get(timeout, _default(ModelServer, timeout)), f"{where}.{timeout}")
    if "api_key" in entry and "api_key_env" in entry:
        raise ConfigError(f"{where}.api_key_env", "give api_key or api_key_env, not both")
    if "api_key" in entry:
        if not isinstance(entry["api_key"], str):
            raise ConfigError(f"{where}.api_key", "must be a string")
        wanted["api_key"] = entry["api_key"]
    elif "api_key_env" in entry:
        variable = _string(entry["api_key_env"], f"{where}.api_key_env")
        if variable not in environ:
            raise ConfigError(f"{where}.api_key_env", f"environment variable {variable} is not set")
        if not environ[variable]:
            raise ConfigError(f"{where}.api_key_env", f"environment variable {variable} is empty")
        wanted["api_key"] = environ[variable]

    server = ModelServer.objects.filter(name=name).first() or ModelServer(name=name)
    summary.servers.add(_save(server, wanted, where, {}))

    written = []
    models = _list(entry.get("models", []), f"{where}.models")
    _names_once(models, f"{where}.models", "model")
    for i, model_entry in enumerate(models):
        place = f"{where}.models[{i}]"
        model_entry = _mapping(model_entry, place, MODEL_KEYS)
        if "name" not in model_entry:
            raise ConfigError(place, "a model needs a name")
        model_name = _string(model_entry["name"], f"{place}.name")
        wanted = {
            field_name: _bool(model_entry.get(key, _default(Model, field_name)), f"{place}.{key}")
            for key, field_name in (*MODEL_FIELDS.items(), ("enabled", "enabled"))
        }
        wanted["context_window"] = _int(model_entry.get("context_window", _default(Model, "context_window")),
                                        f"{place}.context_window", MIN_CONTEXT_WINDOW)
        model = Model.objects.filter(server=server, name=model_name).first() or Model(server=server, name=model_name)
        status = _save(model, wanted, place, {v: k for k, v in MODEL_FIELDS.items()})
        written.append((model, model_entry, place, status))
    return written


def _apply_fallbacks(model: Model, entry: dict, where: str, known: _Models) -> bool:
    """Sets the model's ordered fallbacks; True when they changed."""
    wanted = []
    for i, model_id in enumerate(_list(entry.get("fallbacks", []), f"{where}.fallbacks")):
        place = f"{where}.fallbacks[{i}]"
        target = known.get(model_id, place)
        if target.pk == model.pk:
            raise ConfigError(place, "a model cannot fall back to itself")
        if target.pk in wanted:
            raise ConfigError(place, f"{model_id} is listed twice")
        wanted.append(target.pk)
    current = list(ModelFallback.objects.filter(model=model).order_by("position", "id").values_list("fallback_id",
                                                                                                    flat=True))
    if current == wanted:
        return False
    for link in ModelFallback.objects.filter(model=model):
        link.delete()
    for position, fallback_id in enumerate(wanted):
        ModelFallback.objects.create(model=model, fallback_id=fallback_id, position=position)
    return True


def _apply_default(model_id, known: _Models) -> tuple[str, str]:
    model = known.get(model_id, "default_model")
    if model.is_default:
        return model.public_id, "unchanged"
    for previous in Model.objects.filter(is_default=True):  # saved one by one so the registry hears of it
        previous.is_default = False
        previous.save(update_fields=["is_default"])
    model.is_default = True
    model.save(update_fields=["is_default"])
    return model.public_id, "set"


def _apply_group(entry, where: str, known: _Models, summary: Summary) -> None:
    AccountGroup = apps.get_model("accounts", "AccountGroup")
    entry = _mapping(entry, where, GROUP_KEYS)
    if "name" not in entry:
        raise ConfigError(where, "a group needs a name")
    name = _string(entry["name"], f"{where}.name")
    wanted = {}
    for key in ("api_access", "remote_servers_allowed"):
        wanted[key] = _bool(entry.get(key, _default(AccountGroup, key)), f"{where}.{key}")
    for key in ("daily_tokens", "weekly_tokens", "monthly_tokens"):
        wanted[key] = _int(entry.get(key, _default(AccountGroup, key)), f"{where}.{key}", -1)
    key = "attachments_per_message"
    wanted[key] = _int(entry.get(key, _default(AccountGroup, key)), f"{where}.{key}", 0)
    allowed: list[int] = []
    if "allowed_models" in entry:
        for i, model_id in enumerate(_list(entry["allowed_models"], f"{where}.allowed_models")):
            model = known.get(model_id, f"{where}.allowed_models[{i}]")
            if model.pk not in allowed:
                allowed.append(model.pk)
    wanted["all_models"] = "allowed_models" not in entry

    group = AccountGroup.objects.filter(name=name).first() or AccountGroup(name=name)
    status = _save(group, wanted, where, {"all_models": "allowed_models"})
    if set(group.allowed_models.values_list("pk", flat=True)) != set(allowed):
        group.allowed_models.set(allowed)
        status = "updated" if status == "unchanged" else status
    summary.groups.add(status)


def apply_config(data: dict, *, environ: Mapping[str, str] | None = None, dry_run: bool = False) -> Summary:
    """Creates or updates what `data` (a file read by `read_config`) describes, in one transaction.
    Raises ConfigError, having written nothing, at the first mistake. With `dry_run` the
    transaction is rolled back: the summary tells what would change."""
    environ = os.environ if environ is None else environ
    data = _mapping(data, "", TOP_KEYS)
    servers = _list(data.get("servers", []), "servers")
    groups = _list(data.get("groups", []), "groups")
    _names_once(servers, "servers", "server")
    _names_once(groups, "groups", "group")
    summary = Summary()
    known = _Models()
    with transaction.atomic():
        written = []
        for i, entry in enumerate(servers):
            written += _apply_server(entry, f"servers[{i}]", environ, summary)
        for model, entry, where, status in written:
            if _apply_fallbacks(model, entry, where, known) and status == "unchanged":
                status = "updated"
            summary.models.add(status)
        if "default_model" in data:
            summary.default_model = _apply_default(data["default_model"], known)
        for i, entry in enumerate(groups):
            _apply_group(entry, f"groups[{i}]", known, summary)
        if dry_run:
            transaction.set_rollback(True)
    return summary


def apply_config_file(path: str, **options) -> Summary:
    return apply_config(read_config(path), **options)
