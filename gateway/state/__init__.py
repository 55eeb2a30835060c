"""What every process shares: the backend chosen once at start-up for the shared state (`backend`:
`redis.backend`, or `cache_backend` on the embedded default, both answering with `windows`' results),
the counters behind ceilings, quotas and marks (`counters`), the deployments' loads (`loads`) and the one
hop from async code to a worker thread (`workers`). On Redis (`redis/`): the one client, its key prefix
and scripts (`redis.client`), the same steps from the event loop (`redis.loop`), the primary Sentinel
names (`redis.sentinel`).

May import: nothing of the gateway but the settings."""
