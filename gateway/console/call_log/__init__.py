"""The calls log in the console: the list of calls with its filters and a call's page with
the chain tried and, when kept, its prompt and reply (`admin`, `chain`). The home's figures per model
read the same rows (gateway/console/home/call_stats.py).

May import: every room below the console (the rows are gateway/usage/call_records.py's)."""
