"""A producer cut off by its parent (the cell's schedule could not end in time) stops sending and returns, so its
`finally` writes down what it sent; a send loop that ends by itself is awaited as before, errors included."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from bench_tasks.load.pacing import until_stopped


def test_a_stop_cancels_the_loop_and_returns() -> None:
    stop, cancelled = threading.Event(), []

    async def endless() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> None:
        asyncio.get_running_loop().call_later(0.1, stop.set)
        await asyncio.wait_for(until_stopped(SimpleNamespace(stop=stop), endless(), poll_s=0.01), timeout=5)

    asyncio.run(main())
    assert cancelled == [True]


def test_a_loop_that_ends_returns_and_its_error_is_raised() -> None:
    never = SimpleNamespace(stop=threading.Event())

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise RuntimeError("broker refused")

    asyncio.run(until_stopped(never, asyncio.sleep(0.01), poll_s=0.01))
    with pytest.raises(RuntimeError, match="broker refused"):
        asyncio.run(until_stopped(never, fails(), poll_s=0.01))
