"""A group's `guardrails` (docs/guardrails.md), as the file and the admin's group page write them: a
list of checks, each a mapping (`{check: pii, on: input, action: redact}`), stored on the group as
written but for the webhook's secret, checked by the guard's own parser, every mistake named by its
place (`groups[0].guardrails[2].action: ...`).

- **The webhook's secret** is never written in the file: `secret_env` names an environment variable,
  read here, when the file is applied, into the stored item's `secret`. An item that gives neither
  `secret` nor `secret_env` keeps the secret stored for the same `url` (as a server's API key is kept
  when the entry gives none), so a secret typed in the admin survives the file; `secret: ""` clears it.
- **`on`** is a boolean in YAML 1.1 (PyYAML reads `on: input` as `True: input`): a key `True` is read
  as `on`, so the issue-style `{check: pii, on: input}` works unquoted.

The parser is the guard's (gateway/guard), a room above this one: gateway/apps.py hands it in at
start-up (`use`), as it hands the usage drainer the quotas' step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gateway.models import Alias, Model
from gateway.registry.config_file.checks import ConfigError, from_env, list_of

SECRET = "secret"
SECRET_ENV = "secret_env"


class GuardrailsError(ConfigError):
    """The first mistake as a ConfigError (the file stops at it), and `problems`: every mistake the parser
    found, each `place: problem`, for the admin's page to show them all."""

    def __init__(self, where: str, message: str, problems: list[str]):
        super().__init__(where, message)
        self.problems = problems


class _Parser:
    """The guard's `parse_policy` and the error it raises (with `.messages`), once handed in."""

    parse: Callable[[list], object] | None = None
    error: type[Exception] = Exception


def use(parse: Callable[[list], object], error: type[Exception]) -> None:
    """Start-up: the guard's parser and its error type (gateway/apps.py)."""
    _Parser.parse, _Parser.error = parse, error


def policy_problems(items: list) -> list[str]:
    """The parser's messages for `items` (each `guardrails[i].key: problem`); empty when they are valid."""
    if _Parser.parse is None:
        raise RuntimeError("the guardrails' parser was not handed in (gateway/apps.py)")
    try:
        _Parser.parse(items)
    except _Parser.error as exc:
        return [str(message) for message in getattr(exc, "messages", [str(exc)])]
    return []


def with_on(item: dict) -> dict:
    """The item with YAML 1.1's `True` key (an unquoted `on`) read as `on`."""
    if True not in item:
        return item
    if "on" in item:
        raise ValueError("given twice")
    return {("on" if key is True else key): value for key, value in item.items()}


def kept_secrets(items: list[dict], stored: list) -> list[dict]:
    """`items` with each webhook's secret: its own when given (`secret: ""` removes it), else the one
    stored for the same url (each stored secret given once, in order)."""
    spare: dict[str, list[str]] = {}
    for old in stored or []:
        if isinstance(old, dict) and old.get("check") == "webhook" and old.get(SECRET):
            spare.setdefault(str(old.get("url")), []).append(old[SECRET])
    out = []
    for item in items:
        if item.get("check") == "webhook" and SECRET not in item and SECRET_ENV not in item:
            left = spare.get(str(item.get("url")))
            if left:
                item = {**item, SECRET: left.pop(0)}
        elif SECRET in item and not item[SECRET]:
            item = {key: value for key, value in item.items() if key != SECRET}
        out.append(item)
    return out


def read_guardrails(value, where: str, environ: Mapping[str, str], stored: list) -> list[dict]:
    """The list to store for a group, from the file's (or the admin's) `value` at `where` (the group's
    place, `groups[0]`): items as mappings, `on` read, `secret_env` resolved, stored secrets kept, then
    the whole list checked by the guard's parser. Raises ConfigError naming the first mistake's place."""
    items = []
    base = f"{where}.guardrails" if where else "guardrails"
    for i, item in enumerate(list_of(value, base)):
        place = f"{base}[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(place, "must be a mapping such as {check: secrets, on: input, action: block}")
        try:
            item = with_on(item)
        except ValueError as exc:
            raise ConfigError(f"{place}.on", str(exc)) from None
        if SECRET_ENV in item:
            if SECRET in item:
                raise ConfigError(f"{place}.{SECRET_ENV}", "give secret or secret_env, not both")
            if item.get("check") != "webhook":
                raise ConfigError(f"{place}.{SECRET_ENV}", "only for a webhook check")
            secret = from_env(item, SECRET_ENV, place, environ)
            item = {**{key: value for key, value in item.items() if key != SECRET_ENV}, SECRET: secret}
        items.append(item)
    items = kept_secrets(items, stored)
    problems = [placed(message, where) for message in policy_problems(items)]
    problems += [(f"{base}[{i}].model", f"unknown model {item['model']} (write it as server/model, a model's name "
                                        "or an alias's)")
                 for i, item in enumerate(items) if item.get("check") == "model" and not model_known(item["model"])]
    if problems:
        raise GuardrailsError(*problems[0], [f"{place}: {problem}" for place, problem in problems])
    return items


def model_known(model_id: str) -> bool:
    """Whether a model check's model is one the registry could route to: `server/model`, a model's bare name
    or an alias (the database as written so far, so a file may name a model it creates)."""
    model_id = model_id.strip()
    server, sep, name = model_id.partition("/")
    return ((bool(sep) and Model.objects.filter(server__name=server, name=name).exists())
            or Model.objects.filter(name=model_id).exists() or Alias.objects.filter(name=model_id).exists())


def placed(message: str, where: str) -> tuple[str, str]:
    """(place, problem) of a parser's message `guardrails[2].action: problem`, below the group's `where`."""
    place, sep, problem = message.partition(": ")
    if sep and place.startswith("guardrails"):
        return f"{where}.{place}" if where else place, problem
    return f"{where}.guardrails" if where else "guardrails", message
