"""An asyncio event loop whose timers are accurate to microseconds instead of milliseconds.

asyncio's default selector is epoll, whose timeout is rounded *up* to whole milliseconds, so every
`asyncio.sleep` overshoots by up to 1 ms — a generator built on it cannot keep a sub-millisecond
schedule. `select()` takes a microsecond timeout, so a SelectorEventLoop over SelectSelector wakes
within the kernel's timer slack (~50 µs) without burning a core spinning. The generator opens at most a
few hundred sockets per process, well under select's 1024-descriptor limit.
"""

from __future__ import annotations

import asyncio
import ctypes
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


_PR_SET_NAME = 15
_PR_SET_TIMERSLACK = 29
_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)


def tighten_timer_slack(slack_ns: int = 1) -> None:
    """Linux lets every timer of a thread fire up to 50 µs late by default (timer slack, to batch
    wake-ups); a load generator wants its wake-ups on time. Threads started afterwards inherit it."""
    _LIBC.prctl(_PR_SET_TIMERSLACK, slack_ns, 0, 0, 0)


def name_thread(name: str) -> None:
    """Name the calling OS thread (15 characters at most): `top -H` shows it, and the harness's per-thread
    CPU facts (`saturation.ThreadClock`) are keyed by it."""
    _LIBC.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def precise_loop() -> asyncio.AbstractEventLoop:
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


def run_precise(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on the precise loop."""
    with asyncio.Runner(loop_factory=precise_loop) as runner:
        return runner.run(coro)
