"""The load generator of the multi-host stack, run on the client host:

    ip netns exec <client> python -m tests.scale.drive <plan.json>

The plan: `{"base": url, "requests": [[kind, ident, method, url or path, headers, body], ...],
"rate": calls a second (0: as fast as they go), "concurrency": threads, "deadline": seconds}`.
The calls are made by tests/faults/load.py's Load (each with a timeout, the whole bounded in count
and time); each answer is printed as one JSON line as soon as it arrives, so the test follows the
load while it runs (tests/scale/load.py)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from tests.faults.load import Load


class Printed(list):
    """The answers, each printed as it is appended (Load appends under its lock)."""

    def append(self, answer) -> None:
        super().append(answer)
        sys.stdout.write(json.dumps(asdict(answer)) + "\n")
        sys.stdout.flush()


def main() -> None:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    requests = plan["requests"]

    def make(i: int):
        kind, ident, method, url, headers, body = requests[i]
        return kind, ident, method, url, headers, body.encode()

    load = Load(plan["base"], make, len(requests), rate=plan.get("rate", 0), concurrency=plan.get("concurrency", 4),
                answers=Printed(), deadline_seconds=plan.get("deadline", 60))
    load.start().join(plan.get("deadline", 60) + 40)


if __name__ == "__main__":
    main()
