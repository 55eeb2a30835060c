"""What a group's guardrails cost a call: the presets and the prompt `gateway_latency.py --guardrails`
and `--prompt-bytes` use, and, run as a script, the in-process cost of the hot path's question
"has this group guardrails?" (which an end-to-end run cannot resolve to a hundredth of a millisecond)
beside a whole input screening of the same prompt.

    .venv/bin/python bench/guard_cost.py            # timeit of policy_of / screening_for, and one screening
    .venv/bin/python bench/guard_cost.py --check    # the prompt's findings under the pii-redact preset

It needs Django's settings (an unsaved AccountGroup is used) but no database and no server."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

# --guardrails NAME: the bench group's list (AccountGroup.guardrails), set through applyconfig.
PRESETS = {
    # input: personal data replaced (Presidio's default entities), credentials refused
    "pii-redact": [{"check": "pii", "on": "input", "action": "redact"},
                   {"check": "secrets", "on": "input", "action": "block"}],
    # output: the reply read through the sliding window, personal data replaced
    "pii-output": [{"check": "pii", "on": "output", "action": "redact"}],
}

# Planted in the prompt: three e-mail addresses, a card number (Luhn-valid test number) and a phone number;
# no credential, so that a secrets check blocking on input lets the call through.
PLANTED = ("Write to anna.kowalski@example.com about the refund, copy billing@example.org, and let "
           "j.smith@mail.example.net know too. The card on file is 4111 1111 1111 1111 and the customer "
           "asked to be called back on +44 20 7946 0958 before Friday. ")
FILLER = ("The order arrived two days late and one of the three boxes was damaged in transit, so the customer "
          "would like a partial refund or a replacement, whichever can be arranged sooner. ")


def guardrails(value: str | None) -> list | None:
    """A preset's list, or the JSON list in the file `value` names."""
    if not value:
        return None
    if value in PRESETS:
        return PRESETS[value]
    items = json.loads(Path(value).read_text())
    if not isinstance(items, list):
        raise SystemExit(f"--guardrails {value}: the file must hold a JSON list of checks")
    return items


def prompt(nbytes: int) -> str:
    """A user message of about `nbytes` bytes of prose: the planted values first, then ordinary sentences."""
    text = PLANTED
    while len(text.encode()) + len(FILLER) <= nbytes:
        text += FILLER
    return text.rstrip()


def _setup() -> None:
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.setdefault("GATEWAY_VAR_DIR", tempfile.mkdtemp(prefix="bench-guard-cost-"))
    os.environ.setdefault("DEBUG", "false")
    import django

    django.setup()


def _per_call_us(stmt, number: int, repeat: int) -> tuple[float, float]:
    runs = timeit.repeat(stmt, number=number, repeat=repeat)
    per = sorted(r / number * 1e6 for r in runs)
    return statistics.median(per), per[0]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="print the prompt's findings and the redacted text")
    p.add_argument("--prompt-bytes", type=int, default=2048)
    p.add_argument("--screenings", type=int, default=200, help="input screenings timed (default 200)")
    args = p.parse_args()
    _setup()
    from accounts.models import AccountGroup
    from gateway.calls.screened import screening_for
    from gateway.guard import Screening, parse_policy, policy_of

    text = prompt(args.prompt_bytes)
    policy = parse_policy(PRESETS["pii-redact"])

    async def screen() -> tuple[list[str], Screening]:
        screening = Screening(policy, group_name="bench", request_id="r")
        return await screening.input([text]), screening

    if args.check:
        texts, screening = asyncio.run(screen())
        print(f"prompt: {len(text.encode())} bytes\n{texts[0][:400]}…\nfindings:")
        for finding in screening.findings:
            print(f"  {finding}")
        return 0

    bare = AccountGroup(pk=1, name="bench")  # guardrails: [] (the field's default)
    guarded = AccountGroup(pk=2, name="guarded", guardrails=PRESETS["pii-redact"])
    print(f"python {sys.version.split()[0]}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("median (best) of 7 repeats, microseconds per call:")
    for label, stmt in (("policy_of(group without guardrails)", lambda: policy_of(bare)),
                        ("screening_for(group without guardrails)", lambda: screening_for(bare, "r")),
                        ("policy_of(group with pii-redact, kept)", lambda: policy_of(guarded)),
                        ("screening_for(group with pii-redact)", lambda: screening_for(guarded, "r"))):
        median, best = _per_call_us(stmt, number=200_000, repeat=7)
        print(f"  {label:44} {median:8.3f} ({best:.3f})")
    async def timed() -> list[float]:
        await screen()  # the first one imports Presidio and makes the recognisers
        out = []
        for _ in range(args.screenings):
            t0 = time.perf_counter()
            await screen()
            out.append((time.perf_counter() - t0) * 1000)
        return sorted(out)

    times = asyncio.run(timed())
    print(f"input screening of the {len(text.encode())}-byte prompt (pii redact + secrets block), "
          f"{args.screenings} times in one event loop: p50 {statistics.median(times):.2f} ms, "
          f"p99 {times[int(0.99 * (len(times) - 1))]:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
