"""The operator's pages beyond the model admin: the usage console (`usage_views`, its reads in
`usage_reads`, its charts in `usage_chart`), the model server admin's health and discovery
(`server_admin`), and the write-only secret fields of admin forms (`secret_forms`).

May import: every other part of the gateway."""
