"""The console's home, /admin/: is the gateway healthy, who uses it, what does it cost,
over the last hour, day or 30 days. Its reads (`reads`: a fixed number of queries whatever the
number of records; `call_stats`: errors and latency per model from the calls log), its charts
drawn on the server as SVG (`chart`), the page's figures handed to the admin index template
(`page`, unfold's DASHBOARD_CALLBACK), and the console's sidebar (`sidebar`).

May import: the console's other modules (the usage console's reads and windows) and every room
below the console."""
