"""What every process shares: the backend chosen once at start-up for the shared state (`backend`:
`redis.backend`, or `cache_backend` on the embedded default, both answering with `windows`' results),
the counters behind ceilings, quotas and marks (`counters`), the deployments' loads (`loads`), the one
hop from async code to a worker thread (`workers`), the one helper of every buffer a process writes
behind its callers' backs (`write_behind`), a cloud's access token kept and fetched one at a time
(`kept_token`) and the registry of each process's own state (`per_process`). On Redis (`redis/`): the one
client, its key prefix and scripts (`redis.client`), the same steps from the event loop (`redis.loop`), the
primary Sentinel names (`redis.sentinel`).

May import: nothing of the gateway but the settings."""
