"""Settings of batches (batches/, docs/batches.md): how many of a batch's lines run at once, how a failed
line is tried again, how long a worker holds a batch.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from gateway.settings.environment import Environment, reader


def from_env(env: Environment = None) -> dict:
    env = reader(env)
    return {
        # Lines of one batch in flight at once in its worker, and of all batches at most this many to any one
        # model server, across every batch worker and host (gateway/state/slots.py).
        "BATCH_CONCURRENCY": env.int("BATCH_CONCURRENCY", default=8),
        "BATCH_CONCURRENCY_PER_SERVER": env.int("BATCH_CONCURRENCY_PER_SERVER", default=4),
        # Tries of a line whose call failed in a way worth trying again (the server's 429 or 5xx), the
        # first wait between them (doubled at each), and the most lines a batch may hold.
        "BATCH_LINE_ATTEMPTS": env.int("BATCH_LINE_ATTEMPTS", default=3),
        "BATCH_RETRY_SECONDS": env.float("BATCH_RETRY_SECONDS", default=2.0),
        "BATCH_MAX_LINES": env.int("BATCH_MAX_LINES", default=50_000),
        # The niceness a worker of the batch queue alone adds to itself at start (0: none), so that on a host it
        # shares with web processes the live calls get the CPU first.
        "BATCH_WORKER_NICENESS": env.int("BATCH_WORKER_NICENESS", default=10),
        # Internal (docs/configuration.md): a worker's hold on a batch, renewed while it runs; a batch whose
        # hold lapsed (its worker died) is taken up by the next. A worker gives a batch back after a slice
        # of this many seconds (so that batches share the queue's workers), and a batch held up by a quota
        # or a budget is looked at again after the wait.
        "BATCH_LEASE_SECONDS": env.float("BATCH_LEASE_SECONDS", default=30.0),
        "BATCH_SLICE_SECONDS": env.float("BATCH_SLICE_SECONDS", default=300.0),
        "BATCH_WAIT_SECONDS": env.float("BATCH_WAIT_SECONDS", default=60.0),
        "BATCH_SWEEP_SECONDS": env.float("BATCH_SWEEP_SECONDS", default=60.0),
        # Internal: how often a batch forwarded to a cloud's own batch API (batches/forward.py) is read there
        # until it ends; a cloud's batch takes minutes to hours, so a poll costs little at this pace.
        "BATCH_FORWARD_POLL_SECONDS": env.float("BATCH_FORWARD_POLL_SECONDS", default=30.0),
        # Internal: Cloud Storage's JSON API, where a batch forwarded to Vertex AI is written and read back
        # (batches/clouds_vertex.py); the tests point it at their fake Google.
        "BATCH_GCS_URL": env.str("BATCH_GCS_URL", default="https://storage.googleapis.com"),
    }
