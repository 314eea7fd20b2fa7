"""A ceiling on the CPU time of one worker process (`workload.cpus.producers_share` / `receivers_share`): a
cgroup of its own with a CFS quota.

Why a harness would starve itself: a load generator on a busy CI runner or in a container with a fraction of a
core falls behind its schedule, and sixnines must then say the harness saturated, never report the queue as the
broker's latency. A share reproduces that on purpose (the capacity search's harness test uses it), and shows a
user what a smaller generator host would still drive. Pinning (`workload.cpus.producers`) chooses *which* CPUs;
a share bounds *how much* of them.

cgroup v1 (`/sys/fs/cgroup/cpu`, this machine) and v2 (`cpu.max`) are both understood; writing either needs root.
Groups live under `sixnines/` in the controller's root, one per worker, named after the cell id, so the
driver removes them when the cell ends (`release`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000  # the kernel's default CFS period: a share of 0.05 is 5 ms of CPU time per 100 ms
PARENT = "sixnines"


def controller_root() -> tuple[Path, int] | None:
    """(the cpu controller's root folder, cgroup version), or None when neither is mounted."""
    if (V1_ROOT / "cpu.cfs_quota_us").exists():
        return V1_ROOT, 1
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return V2_ROOT, 2
    return None


def unavailable() -> str | None:
    """Why a share cannot be applied on this host (None: it can)."""
    found = controller_root()
    if found is None:
        return "no cgroup cpu controller is mounted (cgroup v1 /sys/fs/cgroup/cpu or v2 cpu in cgroup.controllers)"
    root, _version = found
    if not os.access(root, os.W_OK):
        return f"{root} is not writable by this user (a CPU share needs root)"
    return None


def confine(name: str, cpus: float, pid: int | None = None) -> Path:
    """Move process `pid` (the calling one by default) into cgroup `sixnines/<name>`, limited to `cpus` CPUs of
    time; its folder."""
    found = controller_root()
    if found is None:
        raise OSError(unavailable())
    root, version = found
    parent = root / PARENT
    parent.mkdir(exist_ok=True)
    group = parent / name
    group.mkdir(exist_ok=True)
    quota_us = max(1000, round(cpus * PERIOD_US))  # the kernel refuses quotas under 1 ms
    if version == 1:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota_us))
    else:
        for level in (root, parent):  # v2 hands a controller down only when each level enables it
            (level / "cgroup.subtree_control").write_text("+cpu")
        (group / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
    (group / "cgroup.procs").write_text(str(os.getpid() if pid is None else pid))
    return group


def release(prefix: str) -> list[str]:
    """Remove this cell's groups (`sixnines/<prefix>*`) once their processes have exited; the names removed."""
    found = controller_root()
    parent = None if found is None else found[0] / PARENT
    if parent is None or not parent.is_dir():
        return []
    removed = []
    for group in sorted(parent.glob(f"{prefix}*")):
        with contextlib.suppress(OSError):  # a process still inside (not yet reaped): left for `release` later
            group.rmdir()
            removed.append(group.name)
    return removed
