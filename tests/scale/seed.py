"""Data of the multi-host tests, written on a gateway host in one process (tests/faults/seed.py's
operations, plus `accounts`: several accounts at once, one Django start-up for all of them):

    python -m tests.scale.seed '{"op": "accounts", "name": "meter", "count": 15, "daily_tokens": -1}'"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    import django

    django.setup()
    from tests.faults.seed import OPS, account

    spec = json.loads(sys.argv[1])
    if spec["op"] == "accounts":
        name, count = spec.pop("name"), spec.pop("count")
        result = [account({**spec, "name": f"{name}-{i}"}) for i in range(count)]
    else:
        result = OPS[spec["op"]](spec)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
