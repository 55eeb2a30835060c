"""`python -m tests.upstream --port 9100 [--latency-ms 50 --tokens-per-second 200 --kind both ...]`

Every knob is also settable while running: `POST /_control` with a JSON object, `POST /_control/reset`."""

from __future__ import annotations

import argparse
import json
import sys

import uvicorn

from .app import UpstreamApp
from .core import KINDS, State


def _csv(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.upstream", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9100)
    p.add_argument("--kind", choices=KINDS, default="both", help="wire formats served")
    p.add_argument("--latency-ms", type=float, default=0, help="delay before the response headers")
    p.add_argument("--tokens-per-second", type=float, default=0, help="pace of streamed tokens (0 = no delay)")
    p.add_argument("--reply", help='fixed reply text instead of "Echo: <last user message>"')
    p.add_argument("--require-key", metavar="KEY", help="demand Authorization: Bearer KEY or x-api-key: KEY")
    p.add_argument("--no-usage", dest="usage", action="store_false", help="send no usage at all")
    p.add_argument("--models", type=_csv, default=["echo-1"], help="comma-separated model names")
    p.add_argument("--embedding-dim", type=int, default=64)
    p.add_argument("--tool-name")
    p.add_argument("--tool-arguments", type=json.loads, default={}, help="JSON object")
    p.add_argument("--fail-status", type=int)
    p.add_argument("--fail-times", type=int, default=-1, help="-1 = every request")
    p.add_argument("--fail-paths", type=_csv, help="comma-separated path prefixes")
    p.add_argument("--cut-after-tokens", type=int)
    p.add_argument("--stall-after-tokens", type=int)
    p.add_argument("--stall-seconds", type=float, default=30)
    p.add_argument("--ollama-only", action="store_true", help="list models on /api/tags only (/v1/models: 404)")
    p.add_argument("--leak-credentials", action="store_true",
                   help="error messages echo the request's Authorization and x-api-key (a leaky server)")
    p.add_argument("--error-after-tokens", type=int, help="streams: an error event after N tokens")
    p.add_argument("--no-record", dest="record", action="store_false",
                   help="keep no request log (long benchmarks)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    knobs = {k: v for k, v in vars(args).items() if k not in ("host", "port")}
    state = State()
    state.configure(**knobs)
    print(f"upstream: serving on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    uvicorn.run(UpstreamApp(state), host=args.host, port=args.port, log_level="warning", lifespan="off",
                access_log=False, timeout_keep_alive=30)


if __name__ == "__main__":
    main()
