import asyncio

import pytest


@pytest.fixture
def thread_hops(monkeypatch):
    """The functions handed to `asyncio.to_thread` during the test, in order (each still runs)."""
    hops = []
    real = asyncio.to_thread

    async def counted(fn, *args):
        hops.append(fn)
        return await real(fn, *args)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    return hops
