"""RabbitMQ releases: Debian's `rabbitmq-server` package, the one version this machine's Debian ships.

There is nothing to fetch at run time: the project's set-up (`make tools`) installs the package with apt when it
is missing, with the Erlang it depends on. Before a node is started the installed package is checked to be the
version the cell asked for; once it runs, the node itself says which RabbitMQ and Erlang it is (`nodes.py`
records that, never this module's constant). The package's system service is never used: nodes are run from
the package's scripts through the cell's server home (`home.py`) with every path pointed into the cell's own folder.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ...errors import BrokerError

PACKAGE = "rabbitmq-server"

# Newest first. Debian bookworm ships one RabbitMQ (3.10.8, security fixes as Debian revisions of it), so a
# matrix that says `latest` gets this one; another release would need another Debian suite.
VERSIONS: tuple[str, ...] = ("3.10.8",)

# Where the package puts its scripts (links into lib/rabbitmq_server-<version>/sbin).
SCRIPTS_DIR = Path("/usr/lib/rabbitmq/bin")
LIB_DIR = Path("/usr/lib/rabbitmq/lib")

INSTALL_HINT = "run `make tools` (it installs Debian's rabbitmq-server with apt when missing)"


def resolve_version(version: str) -> str:
    """`latest` is the newest known release; a concrete version is returned unchanged."""
    return VERSIONS[0] if version == "latest" else version


def upstream_version(debian_version: str) -> str:
    """`3.10.8-1.1+deb12u1` → `3.10.8`; `1:25.2.3+dfsg-1+deb12u4` → `25.2.3` (epoch and Debian revision dropped)."""
    without_epoch = debian_version.split(":", 1)[-1]
    return without_epoch.split("-", 1)[0].split("+", 1)[0]


def package_version(package: str = PACKAGE) -> str | None:
    """The installed Debian version of `package` (e.g. `3.10.8-1.1+deb12u1`), None when it is not installed."""
    if shutil.which("dpkg-query") is None:
        return None
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", package], capture_output=True, text=True
    )
    status, _, version = done.stdout.partition(" ")
    return version.strip() if done.returncode == 0 and status == "installed" else None


def server_script(version: str) -> Path:
    """The verified `rabbitmq-server` script of `version`: the package is installed, is that version, and its
    release folder and Erlang are in place. Raises BrokerError saying how to get it otherwise."""
    installed = package_version()
    if installed is None:
        raise BrokerError(f"{PACKAGE} is not installed: {INSTALL_HINT}")
    if upstream_version(installed) != version:
        known = ", ".join(VERSIONS)
        raise BrokerError(
            f"{PACKAGE} {upstream_version(installed)} ({installed}) is installed, the cell asks for {version} "
            f"(known: {known})"
        )
    script = LIB_DIR / f"rabbitmq_server-{version}" / "sbin" / "rabbitmq-server"
    if not script.is_file():
        raise BrokerError(f"{PACKAGE} {installed} is installed but {script} is missing: reinstall it ({INSTALL_HINT})")
    for tool in ("erl", "epmd", "erl_call"):
        if shutil.which(tool) is None:
            raise BrokerError(f"Erlang's `{tool}` is not on PATH ({PACKAGE} depends on erlang-base): {INSTALL_HINT}")
    return script


def erlang_package_version() -> str | None:
    """The Debian version of the Erlang runtime the nodes run on (erlang-base)."""
    return package_version("erlang-base")
