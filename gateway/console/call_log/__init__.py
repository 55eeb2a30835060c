"""The calls log in the console (issue 26): the list of calls with its filters and a call's page with
the chain tried and, when kept, its prompt and reply (`admin`, `chain`), and what the console's home
reads of the calls per model: calls, error rate, latency and time to first token (`reads`).

May import: every room below the console (the rows are gateway/usage/call_records.py's)."""
