"""RabbitMQ releases: Debian's `rabbitmq-server` package, whatever the machine's apt sources serve.

The release list (`list_releases`) has one release per upstream version apt serves (`apt-cache madison`) or the
machine has installed (`brokers/debian.py`). Only the installed one can run: Debian installs one version of a
package at a time, and each Debian suite carries one RabbitMQ (bookworm: 3.10.8, security fixes as Debian
revisions of it), so another release needs another suite in the apt sources and the package replaced. RabbitMQ's
own apt repositories and release archives are not among the registries this project reaches.

There is nothing to fetch at run time: the project's set-up (`make tools`) installs the package with apt when it
is missing, with the Erlang it depends on. Before a node is started the installed package is checked to be the
version the cell asked for; once it runs, the node itself says which RabbitMQ and Erlang it is (`nodes.py`
records that, never this module's constant). The package's system service is never used: nodes are run from
the package's scripts through the cell's server home (`home.py`) with every path pointed into the cell's own folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ...brokers import debian
from ...errors import BrokerError
from ...releases import Release

PACKAGE = "rabbitmq-server"
SOURCE = f"Debian package {PACKAGE}"

# Where the package puts its scripts (links into lib/rabbitmq_server-<version>/sbin).
SCRIPTS_DIR = Path("/usr/lib/rabbitmq/bin")
LIB_DIR = Path("/usr/lib/rabbitmq/lib")

INSTALL_HINT = "run `make tools` (it installs Debian's rabbitmq-server with apt when missing)"


def list_releases() -> list[Release]:
    """The releases apt serves or the machine has installed; all but the installed one say what they take."""
    return debian.package_releases(PACKAGE, SOURCE)


def resolve_version(version: str) -> str:
    """`latest` is the installed release (the only one that can run); a concrete version is returned unchanged."""
    if version != "latest":
        return version
    installed = package_version()
    if installed is None:
        raise BrokerError(f"{PACKAGE} is not installed: {INSTALL_HINT}")
    return upstream_version(installed)


upstream_version = debian.upstream_version


def package_version(package: str = PACKAGE) -> str | None:
    """The installed Debian version of `package` (e.g. `3.10.8-1.1+deb12u1`), None when it is not installed."""
    return debian.installed_version(package)


def server_script(version: str) -> Path:
    """The verified `rabbitmq-server` script of `version`: the package is installed, is that version, and its
    release folder and Erlang are in place. Raises BrokerError saying how to get it otherwise."""
    installed = package_version()
    if installed is None:
        raise BrokerError(f"{PACKAGE} is not installed: {INSTALL_HINT}")
    if upstream_version(installed) != version:
        raise BrokerError(
            f"{PACKAGE} {upstream_version(installed)} ({installed}) is installed, the cell asks for {version} "
            f"(one version of a Debian package is installed at a time: 'sixnines brokers fetch rabbitmq --list')"
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
