"""The account holders' own pages at /account/: a session login with the API login's password
check and lockout, their usage and spend against their group's quotas and budgets, their API key,
their last calls, their routines and their inbox. No staff right is needed or given: every page
reads the signed-in account's own rows only, and an id of another account's row is a 404."""
