"""The console's form fields of its own: prices and budgets in money (`money`), a ceiling written
"no limit" rather than -1 (`no_limit`), write-only secrets in the theme's password widget (`secret`).
May import what gateway/console may."""
