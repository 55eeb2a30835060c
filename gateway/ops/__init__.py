"""What operators and orchestrators probe: `/livez` and `/readyz` (`health`) and `/metrics`
(`metrics_view`, `metrics_collectors`), and what a web process does once at start
(`web_process`, called by gateway/asgi.py).

May import: every other part of the gateway but `console`."""
