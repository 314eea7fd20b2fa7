"""A worker never outlives the process driving its cell.

A parent killed mid-cell (SIGKILL, or a SIGTERM without cleanup) cannot tell its workers to stop, nobody would
land what they measure, and they would hold the host's cores. A forked worker's parent is multiprocessing's fork
server, which itself lives while any worker does, so the owner is watched through its pidfd rather than by the
parent-death signal.
"""

from __future__ import annotations

import os
import select
import threading

OWNER_GONE = 75  # the exit status of a worker whose owner ended


def exit_with(owner_pid: int) -> None:
    """End this process as soon as `owner_pid` ends (at once if it already has)."""
    try:
        pidfd = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        os._exit(OWNER_GONE)

    def watch() -> None:
        select.select([pidfd], [], [])
        os._exit(OWNER_GONE)

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()
