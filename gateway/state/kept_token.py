"""An access token a process keeps for its model calls (Microsoft Entra ID's for Azure OpenAI, Google's
for Vertex AI): used until `margin` seconds before it expires, so a call normally costs nothing (no thread
hop, no request); when it must be fetched, the blocking fetch (the cloud's own library) runs in a worker
thread and every call that wants it meanwhile awaits that one fetch, whichever event loop or thread asks.
A failed fetch is the caller's to word (`failure`); the next call tries again."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Callable


class KeptToken:
    def __init__(self, fetch: Callable[[], tuple[str, float]], *, margin: float) -> None:
        """`fetch`: blocking, the new token and when it expires (seconds since the epoch)."""
        self._fetch = fetch
        self.margin = margin
        self.token = ""
        self.expires_at = 0.0
        self._lock = threading.Lock()  # one fetch at a time, whichever event loop (or thread) asks
        self._fetching: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = (
            weakref.WeakKeyDictionary())

    def current(self) -> str | None:
        """The token when it is good for a while yet (no I/O)."""
        if self.token and time.time() < self.expires_at - self.margin:
            return self.token
        return None

    def fetch_now(self) -> str:
        """The token, fetched unless another thread just did (blocking: in a worker thread)."""
        with self._lock:
            if token := self.current():
                return token
            self.token, self.expires_at = self._fetch()
            return self.token

    async def get(self, failure: Callable[[Exception], Exception]) -> str:
        """The token; a fetch that fails raises `failure(the library's exception)`."""
        if token := self.current():
            return token
        loop = asyncio.get_running_loop()
        task = self._fetching.get(loop)
        if task is None or task.done():
            task = self._fetching[loop] = loop.create_task(self._fetched(failure))
            task.add_done_callback(_seen)
        return await asyncio.shield(task)  # a caller that goes away leaves the fetch to the others

    async def _fetched(self, failure: Callable[[Exception], Exception]) -> str:
        try:
            return await asyncio.to_thread(self.fetch_now)
        except Exception as exc:  # whatever the cloud's library raises: its words, in the caller's failure
            raise failure(exc) from None


def _seen(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()  # read, also when every caller went away: asyncio would log it as never retrieved
