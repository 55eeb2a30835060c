"""The durable record of what was used: the local spool (`spool`), the usage writer that drains it
into the database once (`writer`), and the daily counts of failed calls (`call_failures`).

May import: `gateway.registry` and below."""
