"""Database work from async code: one way to hop to a worker thread and back."""

from __future__ import annotations

from functools import wraps
from typing import Any, Awaitable, Callable

from asgiref.sync import sync_to_async
from django.db import close_old_connections


def in_worker(function: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """`function` as a coroutine run on a thread of the shared executor, which gives its
    database connection back (to the pool) when it ends."""

    @wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(run, thread_sensitive=False)
