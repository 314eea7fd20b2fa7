"""Servers from Debian's packages: which upstream releases the machine's apt sources serve, and which is installed.

A Debian package is installed in one version at a time, so of the releases apt serves (`apt-cache madison`, read
from the apt lists: no network) only the installed one can run; another is listed with what it takes (`apt-get
install PACKAGE=VERSION`, which replaces the installed one). A Debian suite usually carries one upstream release
of a server, with security fixes as Debian revisions of it (`3.10.8-1.1+deb12u1`), so each suite adds at most one.
"""

from __future__ import annotations

import shutil
import subprocess

from ..releases import Release, is_version

TIMEOUT_S = 30.0


def upstream_version(debian_version: str) -> str:
    """`3.10.8-1.1+deb12u1` → `3.10.8`; `5:7.0.15-1~deb12u10` → `7.0.15` (epoch and Debian revision dropped)."""
    without_epoch = debian_version.split(":", 1)[-1]
    return without_epoch.split("-", 1)[0].split("+", 1)[0].split("~", 1)[0]


def installed_version(package: str) -> str | None:
    """The installed Debian version of `package` (e.g. `3.10.8-1.1+deb12u1`), None when it is not installed."""
    if shutil.which("dpkg-query") is None:
        return None
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", package],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    status, _, version = done.stdout.partition(" ")
    return version.strip() if done.returncode == 0 and status == "installed" else None


def served_versions(package: str) -> list[str]:
    """The Debian versions of `package` the apt sources serve (`apt-cache madison`), newest first as apt lists
    them; none when apt is missing or its lists were never fetched (`apt-get update`)."""
    if shutil.which("apt-cache") is None:
        return []
    done = subprocess.run(["apt-cache", "madison", package], capture_output=True, text=True, timeout=TIMEOUT_S)
    return madison_versions(done.stdout)


def madison_versions(text: str) -> list[str]:
    """The version column of `apt-cache madison` output (`pkg | version | source`), each once."""
    found = [line.split("|")[1].strip() for line in text.splitlines() if line.count("|") >= 2]
    return list(dict.fromkeys(found))


def package_releases(package: str, source: str) -> list[Release]:
    """One release per upstream version apt serves or the machine has installed; each not installed says what
    it takes. `source` names where it comes from (`Debian package rabbitmq-server`)."""
    return releases_of(package, source, installed_version(package), served_versions(package))


def releases_of(package: str, source: str, installed: str | None, served: list[str]) -> list[Release]:
    """Pure: the releases for an installed Debian version (or None) and the served ones."""
    found: dict[str, Release] = {}
    if installed is not None and is_version(upstream_version(installed)):
        found[upstream_version(installed)] = Release(upstream_version(installed), f"{source} {installed} (installed)")
    for debian_version in served:
        upstream = upstream_version(debian_version)
        if upstream in found or not is_version(upstream):
            continue
        if installed is None:
            missing = f"{package} is not installed (apt-get install {package}={debian_version})"
        else:
            missing = (
                f"{package} {installed} is installed, and Debian installs one version of a package at a time "
                f"(apt-get install {package}={debian_version} would replace it)"
            )
        found[upstream] = Release(upstream, f"{source} {debian_version}", missing)
    return list(found.values())
