"""A call's page in the console: the chain tried, one row per model with how it went, and the
prompt and reply when the call's group kept them. Every text is escaped (a server's error, a
prompt): format_html."""

from __future__ import annotations

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from gateway.models import CallRecord

# What each attempt's outcome means (gateway/calls/attempts.py names them).
OUTCOMES = {
    "ok": ("answered", ""),
    "refused": ("refused", "the request, as invalid"),
    "unavailable": ("unavailable", "429, 5xx, quota or key"),
    "unreachable": ("unreachable", "no connection, or a timeout"),
    "bad_response": ("bad response", "nothing usable"),
    "skipped": ("skipped", "cooling down"),
}


HEADS = ("#", "Model", "Server", "Outcome", "Status", "First byte", "Error")
CELL = ("text-align: left; vertical-align: top; padding: 4px 12px 4px 0; "
        "border-bottom: 1px solid rgba(127, 127, 127, .25);")


def chain_table(call: CallRecord) -> SafeString | str:
    attempts = [a for a in call.attempts or () if isinstance(a, dict)]
    if not attempts:
        return "No model was called (refused before the chain, or answered from the response cache)."
    cell = f"<td style='{CELL}'>{{}}</td>"
    rows = format_html_join(
        "", "<tr data-outcome='{}'>" + cell * 7 + "</tr>",
        ((a.get("outcome", ""), index, a.get("model", ""), a.get("server", ""),
          _outcome(a.get("outcome")), _text(a.get("status")), _ms(a.get("ttfb_ms")),
          a.get("error") or "") for index, a in enumerate(attempts, 1)))
    heads = "".join(f"<th style='{CELL} font-weight: 600'>{name}</th>" for name in HEADS)
    return format_html("<table id='call-chain' style='width: 100%; border-collapse: collapse'><thead><tr>" + heads
                       + "</tr></thead><tbody>{}</tbody></table>", rows)


def captured(text: str) -> SafeString | str:
    if not text:
        return "(none)"
    return format_html("<pre class='call-text' style='white-space: pre-wrap; overflow-wrap: anywhere; "
                       "max-height: 24rem; overflow: auto'>{}</pre>", text)


def _outcome(outcome) -> SafeString | str:
    word, why = OUTCOMES.get(outcome, (str(outcome or ""), ""))
    return format_html("{}<br><small>{}</small>", word, why) if why else word


def _ms(value) -> str:
    return f"{value:,.1f} ms" if isinstance(value, (int, float)) else "–"


def _text(value) -> str:
    return "–" if value is None else str(value)
