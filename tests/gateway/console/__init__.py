"""The operator's console pages (gateway/console/, gateway/admin.py)."""
