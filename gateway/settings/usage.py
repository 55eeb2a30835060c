"""Settings of the usage records (gateway/usage/writer.py) and the currency they are priced in.

Usage records are appended to a spool file of each process under USAGE_SPOOL_DIR (one per host, shared by
its processes) and written to the database by a background thread every USAGE_FLUSH_SECONDS,
USAGE_BATCH_SIZE records per INSERT; every USAGE_ORPHAN_SCAN_SECONDS each process also writes the spool
files of processes that died.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader

# Most records in one INSERT of the usage writer (docs/scaling.md).
USAGE_BATCH_SIZE = 500


def from_env(env: Environment = None, *, var_dir: Path) -> dict:
    env = reader(env)
    # The installation's one currency: what model prices and budgets are in, as an ISO 4217 code.
    currency = env.str("CURRENCY", default="USD").strip().upper()
    if not (len(currency) == 3 and currency.isalpha()):
        raise ImproperlyConfigured(f"CURRENCY must be a three-letter ISO 4217 code such as USD, not {currency!r}.")
    return {
        # Internal (docs/configuration.md), as USAGE_ORPHAN_SCAN_SECONDS: tests and benchmarks turn them.
        "USAGE_FLUSH_SECONDS": env.float("USAGE_FLUSH_SECONDS", default=0.5),
        "USAGE_BATCH_SIZE": USAGE_BATCH_SIZE,
        "USAGE_SPOOL_DIR": Path(env.str("USAGE_SPOOL_DIR", default=str(var_dir / "spool"))),
        "USAGE_ORPHAN_SCAN_SECONDS": env.float("USAGE_ORPHAN_SCAN_SECONDS", default=5.0),
        "CURRENCY": currency,
    }
