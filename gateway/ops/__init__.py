"""What operators and orchestrators probe: `/livez` and `/readyz` (`health`) and `/metrics`
(`metrics_view`, `metrics_collectors`), what every process does once Django is set up (`process_start`,
called by gateway/apps.py: the folders, the metrics folder, the kept secret key), and what a web process
does once at start (`web_process`, called by gateway/asgi.py).

May import: every other part of the gateway but `console`."""
