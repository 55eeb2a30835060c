"""Removing credentials from text that leaves the gateway: a model server's error message (some
echo the `Authorization` header or say "invalid key sk-…"), a run's or a delivery's error, a log
line.

`redact(text, secrets)` replaces with `[redacted]`:
- every occurrence of the credentials known to be involved (`secrets`: the model server's own key,
  the `Authorization`/`x-api-key` values that were sent), also URL-encoded or JSON-escaped, and any
  run of 10 or more characters taken from one of them (a key cut short by a truncated message);
- anything shaped like a credential (`KEY_SHAPES`): provider keys (`sk-…`, `sk-ant-…`, `hf_…`,
  `AKIA…`, `ghp_…`, `xox?-…`, `AIza…`, …), our own `svc_usr_…` keys, `Bearer <token>`,
  `Basic <base64>`, JSON Web Tokens, Telegram bot tokens, and the value after a credential's name
  (`api_key=…`, `"x-api-key": "…"`, `password: …`);
- with `loose=True` (the default), long random-looking tokens too (`_looks_random`): 32 or more hex
  digits, or an unbroken run of 24 or more letters and digits that mixes upper case, lower case and
  digits. Ordinary prose, model names (`Meta-Llama-3-70B-Instruct`), paths and URLs do not look
  like that. Log lines use `loose=False`: request ids are 32 hex digits and must stay readable.

Credentials shorter than MIN_SECRET_CHARS are not searched for: a "key" like `ollama` or `x` is
no secret, and replacing it would garble every message that mentions the word."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import quote

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
MIN_FRAGMENT_CHARS = 10  # a piece of a known secret this long is redacted as well

# Headers whose values are credentials.
CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key")

_NAMES = (r"(?:x[-_])?api[-_]?key|apikey|access[-_]?token|refresh[-_]?token|id[-_]?token|auth[-_]?token|"
          r"session[-_]?token|bearer[-_]?token|client[-_]?secret|secret[-_]?key|secret|token|password|passwd|"
          r"authorization")
_VALUE = r"[^\s\"'\\,;&<>)}\]]"  # a character of a value after `name=` / `name: `

# Query parameters whose value is always a secret (a key sent in the URL by mistake).
QUERY_SECRET = re.compile(
    r"(?i)((?:^|(?<=[?&;]))(?:api[-_]?key|apikey|key|token|access[-_]?token|refresh[-_]?token|auth[-_]?token|"
    r"id[-_]?token|password|passwd|pwd|secret|client[-_]?secret|signature|sig|auth|code)=)(?!\[redacted\])[^&;#\s\"'<>]+")

KEY_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    # `Bearer <token>` / `Basic <base64>`: the scheme stays, the credential goes
    (re.compile(r"(?i)\b(Bearer)(\s+)(?!\[redacted\]|tokens?\b|auth)[A-Za-z0-9._~+/=\-]{6,}"), r"\1\2" + REDACTED),
    (re.compile(r"(?i)\b(Basic)(\s+)(?!\[redacted\])(?-i:(?=[A-Za-z0-9+/]*[0-9+/=]|[A-Za-z0-9+/]+[A-Z]))"
                r"[A-Za-z0-9+/]{8,}={0,2}"), r"\1\2" + REDACTED),
    # provider and gateway key formats
    (re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{6,}"), REDACTED),  # OpenAI, Anthropic (sk-ant-), DeepSeek…
    (re.compile(r"(?<![A-Za-z0-9])svc_usr_[A-Za-z0-9_]{4,}"), REDACTED),  # this gateway's API keys
    (re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"), REDACTED),  # AWS access key id
    (re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
    (re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9\-]{10,}"), REDACTED),  # Slack
    (re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}"), REDACTED),  # Google
    (re.compile(r"(?<![A-Za-z0-9])(?:hf|gsk|r8|pplx|xai|nvapi|fw|csk)[_-][A-Za-z0-9_\-]{20,}"), REDACTED),
    (re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"), REDACTED),  # JWT
    (re.compile(r"(?<![A-Za-z0-9])(bot)?\d{6,12}:[A-Za-z0-9_\-]{30,}"), r"\1" + REDACTED),  # Telegram bot token
    (QUERY_SECRET, r"\1" + REDACTED),
    # the value after a credential's name (api_key=…, "x-api-key": "…", password: …) when it looks
    # like a credential: a digit, a symbol of a key, or a capital inside it ("password: expected …"
    # is prose and stays; a number shorter than 12 digits too: "token: 4096")
    (re.compile(rf"(?i)(?<![A-Za-z0-9])({_NAMES})(\\?[\"']?\s*[:=]\s*\\?[\"']?)"
                rf"(?!\[redacted\]|Bearer\b|Basic\b|\d{{1,11}}(?!{_VALUE}))"
                rf"(?-i:(?={_VALUE}*[0-9_\-+/=]|{_VALUE}+[A-Z])){_VALUE}{{4,}}"), r"\1\2" + REDACTED),
)

# Long random-looking tokens (`loose`): whole tokens, judged by `_looks_random`.
_LOOSE_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-+/=])[A-Za-z0-9_\-+/]{24,}={0,2}(?![A-Za-z0-9_\-+/=])")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{32,}")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]{24,}")


def _looks_random(token: str) -> bool:
    """32+ hex digits in a row (not all digits), or a run of 24+ letters and digits mixing upper
    case, lower case and digits: what keys and tokens are made of, and prose, model names, paths
    and URLs are not."""
    for run in _HEX_RUN.findall(token):
        if not run.isdigit():
            return True
    for run in _ALNUM_RUN.findall(token):
        if any(c.isdigit() for c in run) and any(c.islower() for c in run) and any(c.isupper() for c in run):
            return True
    return False


def _loose(match: re.Match[str]) -> str:
    return REDACTED if _looks_random(match.group(0)) else match.group(0)


_FRAGMENT_TOKEN = re.compile(r"[A-Za-z0-9._~+/=\-]{%d,}" % MIN_FRAGMENT_CHARS)


def redact(text: str, secrets: Iterable[str | None] = (), *, loose: bool = True) -> str:
    """`text` without the given credentials and without anything shaped like one."""
    if not text:
        return text
    if not isinstance(text, str):
        text = str(text)
    known = _variants(secrets)
    if known:
        text = _replace_known(text, known)
    for pattern, replacement in KEY_SHAPES:
        text = pattern.sub(replacement, text)
    if loose:
        text = _LOOSE_TOKEN.sub(_loose, text)
    if known:
        text = _replace_fragments(text, known)
    return text


def credentials_in(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> list[str]:
    """The credential values among request headers: each whole value, and the token after its
    scheme (`Bearer sk-…` gives `Bearer sk-…` and `sk-…`)."""
    if headers is None:
        return []
    items = headers.items() if hasattr(headers, "items") else headers
    found: list[str] = []
    for name, value in items:
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if name.lower() not in CREDENTIAL_HEADERS or not value:
            continue
        found.append(value)
        scheme, _, token = value.partition(" ")
        if token.strip():
            found.append(token.strip())
    return found


# What else holds credentials, each a function without I/O: the model servers' keys of the registry
# this process loaded (gateway/registry/snapshot.py loaded_server_keys, added by gateway/apps.py).
secret_sources: list[Callable[[], Iterable[str]]] = []
# The settings that hold credentials.
SETTINGS_SECRETS = ("TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET", "WHATSAPP_TOKEN", "EMAIL_HOST_PASSWORD")


def configured_secrets() -> list[str]:
    """Credentials this process holds, without any I/O: the keys of the model servers in the
    registry if this process has loaded it, and the channel tokens and passwords of the settings.
    Safe to call from a log filter (no database query, nothing that logs).

    It fails closed: a source that fails, or settings that cannot be read, raise here rather than
    leave their credentials out of the list, so that no caller cleans a text without them (the log
    filter then writes a fixed text instead of the record: gateway/telemetry/logfilters.py). Only a
    process with no settings at all (none configured) has none of theirs to find."""
    from django.conf import settings

    found: list[str] = []
    for source in secret_sources:
        found.extend(source())
    if settings.configured:
        for name in SETTINGS_SECRETS:
            value = getattr(settings, name, "")
            if isinstance(value, str) and value:
                found.append(value)
    return found


def _variants(secrets: Iterable[str | None]) -> list[str]:
    """The secrets worth searching for, with their URL-encoded and JSON-escaped forms, longest
    first (so a key is replaced whole before a shorter secret inside it)."""
    out: set[str] = set()
    for secret in secrets:
        if not isinstance(secret, str):
            continue
        secret = secret.strip()
        if len(secret) < MIN_SECRET_CHARS:
            continue
        out.add(secret)
        out.add(quote(secret, safe=""))
        out.add(json.dumps(secret)[1:-1])
        out.add(json.dumps(secret)[1:-1].replace("/", "\\/"))  # as some JSON writers escape it
    return sorted(out, key=len, reverse=True)


def _replace_known(text: str, known: list[str]) -> str:
    return _known_pattern(tuple(known)).sub(REDACTED, text)


@functools.lru_cache(maxsize=256)
def _known_pattern(known: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(s) for s in known), re.I)


def _replace_fragments(text: str, known: list[str]) -> str:
    """A token of the text that is a long enough piece of a known secret (a key cut short, or its
    tail after a masked start) goes too."""
    lowered = [s.lower() for s in known]

    def piece(match: re.Match[str]) -> str:
        token = match.group(0)
        for part in _pieces(token):
            if len(part) >= MIN_FRAGMENT_CHARS and any(part.lower() in s for s in lowered):
                return token.replace(part, REDACTED)
        return token

    return _FRAGMENT_TOKEN.sub(piece, text)


def _pieces(token: str) -> list[str]:
    """The token, the token without leading or trailing punctuation (an ellipsis, a dot), and
    what follows its last `=` (`key=sk-…`)."""
    pieces = [token, token.strip("._~+/=-")]
    if "=" in token.rstrip("="):
        pieces.append(token.rstrip("=").rpartition("=")[2].strip("._~+/-"))
    return pieces
