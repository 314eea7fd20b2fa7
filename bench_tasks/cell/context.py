"""What a result is worth nothing without: host, harness revision, client libraries, broker facts."""

from __future__ import annotations

import os
import platform
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

_HARNESS_PACKAGES = ("hdrhistogram", "pyarrow", "numpy")


@cache
def git_sha() -> str:
    """Harness revision; `+dirty` when the working tree has uncommitted changes. An installed package is no
    checkout (a git folder around its site-packages is someone else's): it is named by its release."""
    repo = Path(__file__).resolve().parent.parent
    if not (repo / ".git").exists():
        return f"sixnines=={_installed_version()}"
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _installed_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("sixnines")
    except metadata.PackageNotFoundError:
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_facts() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
    }


def client_versions() -> dict[str, str]:
    versions = {}
    from ..systems import SYSTEMS

    for name in [p for s in SYSTEMS.values() for p in s.client_libraries] + list(_HARNESS_PACKAGES):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def harness_context() -> dict[str, Any]:
    return {"host": host_facts(), "clients": client_versions(), "harness_git_sha": git_sha()}
