"""Child processes watched without being reaped: while a child is not reaped its PID, and with it its group id,
can name no other process, so signalling it or its group cannot reach a process started since (a long test
session recycles PIDs: pid_max is 32768 here)."""

from __future__ import annotations

import os

# a leader that leaves a child behind in its group and exits at once
LEAVES_A_CHILD = "import subprocess, sys; subprocess.Popen(['sleep', '60']); sys.exit(0)"


def unreaped_exit(pid: int) -> os.waitid_result | None:
    """Child `pid`'s exit as waitid reports it, leaving it unreaped; None while it runs. ChildProcessError once
    it has been reaped."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
