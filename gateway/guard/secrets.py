"""Credentials found by detect-secrets' detectors: every one of its regex-based plugins (AWS
access keys, Azure storage keys, private keys, GitHub, GitLab, Slack, Stripe, OpenAI, npm, PyPI,
SendGrid, Twilio, Telegram, Discord tokens, JSON Web Tokens, basic-auth URLs ...), their own
patterns compiled once, run over a string with no file, baseline or settings involved.

Its `scan_line` is not used: it resets the library's global filter settings on each call and
gives the secret without its place, and a finding needs the offset (never the text). A plugin that
checks a match further (a JWT's parts must decode) is asked about the matched string. The public
IPv4 detector is left out (addresses are the pii check's) and so are the entropy and keyword
detectors, which flag ordinary prose. detect-secrets is imported on the first secrets check.
An entity is the plugin's secret type in capitals (`AWS_ACCESS_KEY`, `PRIVATE_KEY`); a private
key's finding spans its whole PEM block when the block's end is there, and a match that stops
inside a token (a JWT's lazy pattern stops before its signature) is carried to the token's end, so a
redaction leaves none of it. A credential base64'd (in an image's alt text, a data field) is found
by decoding each long enough run of base64 and looking in it."""

from __future__ import annotations

import base64
import re
import threading
from dataclasses import dataclass

LEFT_OUT = {"Public IP (ipv4)"}
TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-]*")
BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|---- END SSH2 ENCRYPTED PRIVATE KEY ----")


@dataclass(frozen=True)
class Detector:
    entity: str
    regex: re.Pattern
    confirm: object  # the plugin, when it checks a match further; else None


_detectors: tuple[Detector, ...] | None = None
_lock = threading.Lock()


def entity_of(secret_type: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", secret_type.upper()).strip("_")


def ready() -> bool:
    """Whether detect-secrets' plugins are read (their first use imports them)."""
    return _detectors is not None


def detectors() -> tuple[Detector, ...]:
    global _detectors
    if _detectors is None:
        with _lock:
            if _detectors is None:
                from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
                from detect_secrets.plugins.base import RegexBasedDetector

                found = []
                for secret_type, plugin_class in get_mapping_from_secret_type_to_class().items():
                    if not issubclass(plugin_class, RegexBasedDetector) or secret_type in LEFT_OUT:
                        continue
                    plugin = plugin_class()
                    checks_further = plugin_class.analyze_string is not RegexBasedDetector.analyze_string
                    found += [Detector(entity_of(secret_type), regex, plugin if checks_further else None)
                              for regex in plugin.denylist]
                _detectors = tuple(found)
    return _detectors


def find(text: str) -> list[tuple[int, int, str]]:
    """The spans of `text` holding a credential, without overlaps, in order: the credentials
    themselves, then a run of base64 whose decoded text holds one (the whole run is the span)."""
    spans = find_plain(text)
    for match in BASE64_RUN.finditer(text):
        start, end = match.span()
        if any(start < e and s < end for s, e, _ in spans):
            continue
        run = match.group()
        try:
            decoded = base64.b64decode(run.replace("-", "+").replace("_", "/") + "=" * (-len(run) % 4)).decode()
        except ValueError:  # not base64, or not text once decoded
            continue
        inner = find_plain(decoded)
        if inner:
            spans.append((start, end, inner[0][2]))
    return sorted(spans)


def find_plain(text: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    for detector in detectors():
        for match in detector.regex.finditer(text):
            start, end = match.span()
            if text[end - 1:end].isalnum() or text[end - 1:end] in "._-":
                end = TOKEN_TAIL.match(text, end).end()  # a lazy pattern's match ends where the token does
            if end <= start:
                continue
            if detector.confirm is not None and not any(True for _ in detector.confirm.analyze_string(text[start:end])):
                continue
            if detector.entity == "PRIVATE_KEY":
                dashes = text.rfind("-----", max(0, start - 20), start)  # the header's own dashes
                start = dashes if dashes >= 0 else start
                block_end = PEM_END.search(text, end)
                end = block_end.end() if block_end else end
            if all(end <= s or start >= e for s, e, _ in spans):
                spans.append((start, end, detector.entity))
    return sorted(spans)
