"""The shared state on Redis: the one client per URL, its key prefix and Lua scripts (`client`), the
backend that runs them from synchronous code (`backend`), the same steps from the event loop with the
gateway's own client (`loop`), and the primary Sentinel names (`sentinel`)."""
