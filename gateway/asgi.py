import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

application = get_asgi_application()


def _drop_start_of_request_connection_check() -> None:
    """Django closes stale connections when a request starts and when it ends. Under ASGI each
    request's synchronous work runs in a thread of its own, fresh at the start, so the first
    check finds nothing to close and only costs a thread hand-off per request. The check at
    the end stays: it gives back (to the pool) what the request's synchronous work opened."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)


_drop_start_of_request_connection_check()
