"""The durable record of what was used: the local spool (`spool`), the usage writer that drains it
into the database once (`writer`), the daily counts of failed calls (`call_failures`), and the calls
log: a call's line spooled when its request ends (`call_log`), written and swept (`call_records`).

May import: `gateway.registry` and below."""
