"""The administration API under `/api/v1/admin/`: accounts and their keys, groups, model servers, models,
aliases, every account's routines, and the usage and calls records, for staff session tokens only (an API
key is a 401, another account's session a 403).

Each write goes through the console's own forms (accounts/admin.py, gateway/admin.py) or the routines'
own writes (routines/routine_writes.py), so the API cannot store what the console refuses, and is
written in the audit trail with the staff account as its actor. Lists are paginated by cursor.

May import: accounts, routines and gateway (an entry point, as native/ is: nothing imports it).
"""
