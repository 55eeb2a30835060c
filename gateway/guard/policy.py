"""A group's guardrails read once: `parse_policy` turns the stored list (the group's `guardrails`,
written in the console or by `applyconfig`) into a frozen `Policy`, and `policy_of` keeps it per
group until the list changes.

Every error names its place (`guardrails[2].action: must be one of block, log`), so the console and
`applyconfig` can say exactly which item is wrong. A stored list that no longer parses (written by
hand in the database, or a webhook secret's variable gone) is not ignored: `policy_of` gives a
policy that refuses every call of the group, with the errors logged, since a guard that silently
stopped guarding is worse than a refused call."""

from __future__ import annotations

import copy
import logging
import os
import re
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

CHECKS = ("pii", "secrets", "injection", "words", "model", "webhook")
DIRECTIONS = ("input", "output", "both")
FAIL_MODES = ("open", "closed")
# what each check may do with a finding: a score or a verdict has nothing to redact
ACTIONS = {
    "pii": ("block", "redact", "log"),
    "secrets": ("block", "redact", "log"),
    "words": ("block", "redact", "log"),
    "injection": ("block", "log"),
    "model": ("block", "log"),
    "webhook": ("block", "log"),  # a webhook's own "redact" answer is applied unless the action is log
}
DEFAULT_TIMEOUT = 2.0  # seconds, for model and webhook checks
MAX_TIMEOUT = 30.0
DEFAULT_INJECTION_THRESHOLD = 1.0
MODEL_STYLES = ("llama_guard", "classifier")

# the short names an operator writes, and Presidio's entities they stand for
ENTITIES = {
    "email": "EMAIL_ADDRESS", "phone": "PHONE_NUMBER", "card": "CREDIT_CARD", "iban": "IBAN_CODE",
    "ip": "IP_ADDRESS", "us_ssn": "US_SSN", "us_itin": "US_ITIN", "us_passport": "US_PASSPORT",
    "uk_nhs": "UK_NHS", "uk_nino": "UK_NINO", "es_nif": "ES_NIF", "es_nie": "ES_NIE",
    "it_fiscal_code": "IT_FISCAL_CODE", "pl_pesel": "PL_PESEL", "fi_personal_id": "FI_PERSONAL_IDENTITY_CODE",
    "in_aadhaar": "IN_AADHAAR", "in_pan": "IN_PAN", "sg_nric": "SG_NRIC_FIN", "au_tfn": "AU_TFN",
    "crypto": "CRYPTO", "mac": "MAC_ADDRESS",
}
DEFAULT_ENTITIES = ("email", "phone", "card", "iban", "ip", "us_ssn", "uk_nhs", "crypto")

COMMON_KEYS = {"check", "on", "action"}
KEYS = {
    "pii": {"entities", "restore"},
    "secrets": set(),
    "injection": {"threshold"},
    "words": {"words", "patterns"},
    "model": {"model", "fail", "timeout", "style"},
    "webhook": {"url", "secret", "secret_env", "fail", "timeout"},
}


class PolicyError(ValueError):
    def __init__(self, messages: list[str]):
        super().__init__("; ".join(messages))
        self.messages = messages


@dataclass(frozen=True)
class Check:
    """One item of the list, read. Only the fields of its kind are set."""

    kind: str
    on: str  # input, output or both
    action: str
    place: int  # its index in the list
    entities: tuple[str, ...] = ()  # pii: Presidio's entity names
    restore: bool = False  # pii: the client's own values put back in the reply
    words: tuple[str, ...] = ()
    patterns: tuple[re.Pattern, ...] = ()
    threshold: float = DEFAULT_INJECTION_THRESHOLD
    model: str = ""
    style: str = ""  # model: llama_guard or classifier
    fail: str = "closed"
    timeout: float = DEFAULT_TIMEOUT
    url: str = ""
    secret: str = field(default="", repr=False)

    @property
    def on_input(self) -> bool:
        return self.on in ("input", "both")

    @property
    def on_output(self) -> bool:
        return self.on in ("output", "both")

    @property
    def remote(self) -> bool:
        return self.kind in ("model", "webhook")


@dataclass(frozen=True)
class Policy:
    checks: tuple[Check, ...]
    errors: tuple[str, ...] = ()  # a stored list that did not parse: every call is refused

    @property
    def input_checks(self) -> bool:
        return bool(self.errors) or any(c.on_input for c in self.checks)

    @property
    def output_checks(self) -> bool:
        return any(c.on_output for c in self.checks)

    @property
    def restores(self) -> bool:
        return any(c.kind == "pii" and c.restore and c.on_input for c in self.checks)

    def on(self, direction: str) -> tuple[Check, ...]:
        if direction == "input":
            return tuple(c for c in self.checks if c.on_input)
        return tuple(c for c in self.checks if c.on_output)


def parse_policy(raw: list) -> Policy:
    if not isinstance(raw, list):
        raise PolicyError(["guardrails: must be a list of checks"])
    errors: list[str] = []
    checks = []
    for index, item in enumerate(raw):
        place = f"guardrails[{index}]"
        if not isinstance(item, dict):
            errors.append(f"{place}: must be a mapping such as {{check: pii, on: input, action: redact}}")
            continue
        item_errors: list[str] = []
        check = _check(item, index, place, item_errors)
        errors.extend(item_errors)
        if not item_errors:
            checks.append(check)
    if errors:
        raise PolicyError(errors)
    return Policy(tuple(checks))


def _one_of(item: dict, key: str, allowed, default, place: str, errors: list[str]):
    value = item.get(key, default)
    if value not in allowed:
        errors.append(f"{place}.{key}: must be one of {', '.join(allowed)}")
    return value


def _check(item: dict, index: int, place: str, errors: list[str]) -> Check | None:
    kind = item.get("check")
    if kind not in CHECKS:
        errors.append(f"{place}.check: must be one of {', '.join(CHECKS)}")
        return None
    for key in sorted(set(item) - COMMON_KEYS - KEYS[kind], key=str):
        errors.append(f"{place}.{key}: not a key of a {kind} check")
    on = _one_of(item, "on", DIRECTIONS, "input", place, errors)
    action = _one_of(item, "action", ACTIONS[kind], "block", place, errors)
    options = OPTION_READERS[kind](item, place, errors)
    if kind == "injection" and on != "input":
        errors.append(f"{place}.on: an injection check reads the input only")
    if options.get("restore") and (action != "redact" or on == "output"):
        errors.append(f"{place}.restore: only a redact on the input can be restored in the reply")
    return Check(kind=kind, on=on, action=action, place=index, **options)


def _pii_options(item: dict, place: str, errors: list[str]) -> dict:
    names = item.get("entities", list(DEFAULT_ENTITIES))
    if not isinstance(names, list) or not names:
        errors.append(f"{place}.entities: must be a list of names among {', '.join(ENTITIES)}")
        names = []
    entities = []
    for name in names:
        entity = ENTITIES.get(str(name).lower()) or (name if name in ENTITIES.values() else None)
        if entity is None:
            errors.append(f"{place}.entities: unknown entity {name!r} (known: {', '.join(ENTITIES)})")
        elif entity not in entities:
            entities.append(entity)
    restore = item.get("restore", False)
    if not isinstance(restore, bool):
        errors.append(f"{place}.restore: must be true or false")
    return {"entities": tuple(entities), "restore": restore is True}


def _secrets_options(item: dict, place: str, errors: list[str]) -> dict:
    return {}


def _injection_options(item: dict, place: str, errors: list[str]) -> dict:
    threshold = item.get("threshold", DEFAULT_INJECTION_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold <= 0:
        errors.append(f"{place}.threshold: must be a number above 0")
        threshold = DEFAULT_INJECTION_THRESHOLD
    return {"threshold": float(threshold)}


def _words_options(item: dict, place: str, errors: list[str]) -> dict:
    words, patterns = item.get("words", []), item.get("patterns", [])
    if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
        errors.append(f"{place}.words: must be a list of non-empty strings")
        words = []
    if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
        errors.append(f"{place}.patterns: must be a list of regular expressions")
        patterns = []
    if not words and not patterns and not errors:
        errors.append(f"{place}.words: a words check needs words or patterns")
    compiled = []
    for number, pattern in enumerate(patterns):
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as error:
            errors.append(f"{place}.patterns[{number}]: not a regular expression ({error})")
    return {"words": tuple(words), "patterns": tuple(compiled)}


def _remote_options(item: dict, place: str, errors: list[str]) -> dict:
    fail = _one_of(item, "fail", FAIL_MODES, "closed", place, errors)
    timeout = item.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
        errors.append(f"{place}.timeout: must be a number of seconds above 0, at most {MAX_TIMEOUT:g}")
        timeout = DEFAULT_TIMEOUT
    return {"fail": fail, "timeout": float(timeout)}


def _model_options(item: dict, place: str, errors: list[str]) -> dict:
    model = item.get("model")
    if not isinstance(model, str) or not model.strip():
        errors.append(f"{place}.model: must name a model of the registry")
        model = ""
    default_style = "llama_guard" if "guard" in (model or "").lower() else "classifier"
    style = _one_of(item, "style", MODEL_STYLES, default_style, place, errors)
    return {"model": model.strip(), "style": style, **_remote_options(item, place, errors)}


def _webhook_options(item: dict, place: str, errors: list[str]) -> dict:
    url = item.get("url")
    if not isinstance(url, str) or not re.match(r"https?://[^/\s]+", url):
        errors.append(f"{place}.url: must be an http:// or https:// address")
        url = ""
    secret = item.get("secret", "")
    env = item.get("secret_env")
    if not isinstance(secret, str):
        errors.append(f"{place}.secret: must be a string")
        secret = ""
    if env is not None and not secret:
        if not isinstance(env, str) or not env:
            errors.append(f"{place}.secret_env: must name an environment variable")
        else:
            secret = os.environ.get(env, "")
            if not secret:
                errors.append(f"{place}.secret_env: the variable {env} is not set")
    return {"url": url, "secret": secret, **_remote_options(item, place, errors)}


OPTION_READERS = {"pii": _pii_options, "secrets": _secrets_options, "injection": _injection_options,
                  "words": _words_options, "model": _model_options, "webhook": _webhook_options}

_cache: dict[int, tuple[list, Policy]] = {}
MAX_CACHED = 1024


def policy_of(group) -> Policy | None:
    """The group's policy, or None when it has no guardrails (one attribute read). Kept per group
    until the list differs from the one it was read from (compared by value: a group saved with
    another list, or changed in place, is read again)."""
    raw = getattr(group, "guardrails", None)
    if not raw:
        return None
    kept = _cache.get(group.pk)
    if kept is not None and kept[0] == raw:
        return kept[1]
    try:
        policy = parse_policy(raw)
    except PolicyError as error:
        log.error("the guardrails of group %s do not parse, its calls are refused: %s", group.pk, error)
        policy = Policy((), errors=tuple(error.messages))
    if len(_cache) >= MAX_CACHED:
        _cache.clear()
    _cache[group.pk] = (copy.deepcopy(raw), policy)
    return policy
