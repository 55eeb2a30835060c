"""The console's home (issue 26), /admin/: is the gateway healthy, who uses it, what does it cost,
over the last hour, day or 30 days. Its reads (`reads`: a fixed number of queries whatever the
number of records), its charts drawn on the server as SVG (`chart`), and the page's figures handed
to the admin index template (`page`, unfold's DASHBOARD_CALLBACK).

May import: the console's other modules (the usage console's reads and windows) and every room
below the console."""
