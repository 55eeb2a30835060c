"""The files accounts upload (`/v1/files`, and what batches read and write): each a row (gateway/models/files.py)
and its bytes in the files storage (Django's STORAGES alias `files`), written and removed together (`store`).

May import: web and below (the errors it raises), and the gateway's models.
"""
