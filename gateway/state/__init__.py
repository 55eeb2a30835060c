"""What every process shares: the one Redis client, its key prefix and scripts (`redis_client`),
the backend chosen once at start-up for the shared state (`backend`: `redis_backend`, or
`cache_backend` on the embedded default, both answering with `windows`' results), the counters
behind ceilings, quotas and marks (`counters`), the same steps from the event loop
(`loop_redis`), and the one hop from async code to a worker thread (`workers`).

May import: nothing of the gateway but the settings."""
