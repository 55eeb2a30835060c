"""The operator's pages beyond the model admin: the usage console (`usage_views`, its reads in
`usage_reads`, the panels of the current quota and budget windows in `usage_windows`, its charts in
`usage_chart`), the model server admin's health and discovery (`server_admin`), its "Test connection" and
the chat path's check on save (`server_test_admin`, `server_check`), the theme's classes for what the
console's own fields draw (`styles`), the write-only
the form fields of its own (`fields/`: write-only secrets, prices and budgets in money, "no limit");
the console's home (`home/`) and what the theme (django-unfold) needs beyond itself (`theme/`); the audit
trail of the console's changes (`audit_trail`, django-auditlog); the playground, where staff try a model
streamed as an API call of their own (`playground/`); the accounts' files (`files_admin`).

May import: every other part of the gateway."""
