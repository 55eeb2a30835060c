"""What every process shares: the one Redis client, its key prefix and scripts (`redis_client`),
the counters behind ceilings, quotas and cooldowns through one backend chosen at start-up
(`counters`: Redis, or the Django cache on the embedded default), the same steps from the event
loop (`loop_redis`), and the one hop from async code to a worker thread (`workers`).

May import: nothing of the gateway but the settings."""
