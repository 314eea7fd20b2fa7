"""One RabbitMQ node's folder, config and environment: everything it reads or writes lives under its folder.

The package's `rabbitmq-server` script is started with a cleared environment that points every path RabbitMQ
knows of (config, enabled plugins, data, logs, crash dump, the cookie's home) into the node's folder, so no file of
the system service (/etc/rabbitmq, /var/lib/rabbitmq) is read or written. With `RABBITMQ_ALLOW_INPUT` and
`-noinput` the script `exec`s the Erlang VM instead of waiting on it from a shell, so the process the harness
started *is* beam.smp: SIGSTOP, SIGKILL and SIGTERM reach the broker itself.

Erlang distribution: every node listens on a port of its own on the host's address, and the cell runs one
private epmd on a free port (`ERL_EPMD_PORT`) that the nodes find and register with; `-start_epmd false` keeps
the VM from starting a shared one on 4369.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import BrokerError
from ...secrecy import login_url, private_dir, redacted, write_secret
from .settings import RabbitmqBroker, flatten_conf

# Peer discovery of a joining node: it retries until node 1 answers (the nodes are started together).
DISCOVERY_RETRY_INTERVAL_MS = 250
DISCOVERY_RETRY_LIMIT = 480  # 2 minutes

_KEPT_ENV = ("PATH", "TZ")
DEFAULT_USER = "sixnines"


@dataclass(frozen=True)
class Credentials:
    """The one user of a cell's nodes: the matrix's (`server: {default_user, default_pass}`), else `sixnines` with
    a random password per start. The harness's clients log in with it; no record shows the password."""

    username: str
    password: str = field(repr=False)

    @classmethod
    def of(cls, broker: RabbitmqBroker) -> Credentials:
        conf = flatten_conf(broker.server)
        return cls(
            str(conf.get("default_user", DEFAULT_USER)), str(conf.get("default_pass", secrets.token_urlsafe(24)))
        )

    def client(self) -> dict[str, str]:
        """The brokers' client settings (`access.client_access`'s shape): what the driver logs in with."""
        return {"username": self.username, "password": self.password}

    def url(self, amqp_url: str) -> str:
        """`amqp_url` with this user's credentials, for a client outside the harness (a benchmark's own); never
        recorded."""
        return login_url(amqp_url, self.username, self.password)


@dataclass(frozen=True)
class NodePlan:
    """Where node `index` lives and listens. `home` is the cell's Erlang home (its `.erlang.cookie`)."""

    index: int
    name: str
    host: str
    amqp_port: int
    dist_port: int
    folder: Path
    home: Path
    epmd_port: int
    server_home: Path  # the cell's RABBITMQ_HOME (`home.py`): the package's release with the server's apps only

    @property
    def config_path(self) -> Path:
        return self.folder / "rabbitmq.conf"

    @property
    def log_path(self) -> Path:
        return self.folder / "rabbitmq.log"

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    @property
    def crash_dir(self) -> Path:
        return self.folder / "crash"


def conf_value(value: Any) -> str:
    """rabbitmq.conf values are bare words: booleans lower-case, everything else as written."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def node_settings(plan: NodePlan, seed: str | None, broker: RabbitmqBroker, user: Credentials) -> dict[str, Any]:
    """rabbitmq.conf of one node: its listener, the cell's one user (made at first boot instead of `guest`, and
    allowed beyond loopback because the listener is bound to the cell's address only), peer discovery of node 1
    (`seed`) for joining nodes, then the matrix's `broker.server` verbatim."""
    settings: dict[str, Any] = {
        "listeners.tcp.default": f"{plan.host}:{plan.amqp_port}",
        "default_user": user.username,
        "default_pass": user.password,
        "loopback_users": "none",
    }
    if seed is not None:
        settings |= {
            "cluster_formation.peer_discovery_backend": "classic_config",
            "cluster_formation.classic_config.nodes.1": seed,
            "cluster_formation.discovery_retry_interval": DISCOVERY_RETRY_INTERVAL_MS,
            "cluster_formation.discovery_retry_limit": DISCOVERY_RETRY_LIMIT,
        }
    return settings | flatten_conf(broker.server)


def render_conf(settings: dict[str, Any]) -> str:
    return "".join(f"{key} = {conf_value(value)}\n" for key, value in settings.items())


def erl_tuple(host: str) -> str:
    """An IPv4 address as the Erlang tuple `inet_dist_use_interface` takes (node names are `name@<address>`, so
    the host must be an address, not a name)."""
    try:
        address = ipaddress.IPv4Address(host)
    except ValueError:
        raise BrokerError(f"RabbitMQ nodes need an IPv4 host address, not {host!r}") from None
    return "{" + ",".join(str(part) for part in address.packed) + "}"


def node_env(plan: NodePlan, broker: RabbitmqBroker) -> dict[str, str]:
    """The whole environment of the node's script (nothing inherited but PATH and TZ); the script runs from the
    cell's server home (`home.py`)."""
    env = {key: os.environ[key] for key in _KEPT_ENV if key in os.environ}
    # +B i: SIGINT (a Ctrl-C in the harness's terminal reaches its process group) is ignored, as the package's
    # script does for a foreground node; the harness stops the node itself.
    erl_args = f"+B i -start_epmd false -kernel inet_dist_use_interface {erl_tuple(plan.host)} {broker.erl_args}"
    return env | {
        "HOME": str(plan.home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "ERL_EPMD_PORT": str(plan.epmd_port),
        "ERL_CRASH_DUMP": str(plan.crash_dir / "erl_crash.dump"),  # a dump holds the cookie and the password
        "RABBITMQ_SCRIPTS_DIR": str(plan.server_home / "sbin"),  # RABBITMQ_HOME and ERL_LIBS follow from it
        "RABBITMQ_NODENAME": plan.name,
        "RABBITMQ_USE_LONGNAME": "true",
        "RABBITMQ_DIST_PORT": str(plan.dist_port),
        "RABBITMQ_CONF_ENV_FILE": str(plan.folder / "rabbitmq-env.conf"),
        "RABBITMQ_CONFIG_FILE": str(plan.config_path),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(plan.folder / "advanced.config"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(plan.folder / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(plan.data_dir),
        "RABBITMQ_PLUGINS_EXPAND_DIR": str(plan.data_dir / "plugins-expand"),
        "RABBITMQ_LOG_BASE": str(plan.folder / "log"),
        "RABBITMQ_LOGS": "-",  # to stdout, which is the node's log file
        "RABBITMQ_ALLOW_INPUT": "true",  # exec the VM (see the module docstring); -noinput is passed as an argument
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": erl_args.strip(),
    }


def write_node_files(plan: NodePlan, settings: dict[str, Any]) -> str:
    """Create the node's folder and files; returns the rabbitmq.conf text as recorded in the context (the
    password redacted). The config itself holds the password, so it and the folder are private from the start;
    so is the folder an Erlang crash dump would go to."""
    write_secret(plan.config_path, render_conf(settings))
    (plan.folder / "log").mkdir(parents=True, exist_ok=True)
    plan.data_dir.mkdir(parents=True, exist_ok=True)
    private_dir(plan.crash_dir)
    (plan.folder / "rabbitmq-env.conf").write_text("")  # instead of /etc/rabbitmq/rabbitmq-env.conf
    (plan.folder / "enabled_plugins").write_text("[].\n")  # AMQP 0-9-1 and all queue types are in the core
    return render_conf(redacted(settings))


def node_argv(script: Path, env: dict[str, str]) -> list[str]:
    """`env -i` gives the script exactly `env` whatever the harness's own environment holds."""
    return ["env", "-i", *(f"{key}={value}" for key, value in env.items()), str(script), "-noinput"]


def write_cookie(home: Path, cookie: str) -> None:
    """The cell's Erlang cookie, readable by its owner only from its first byte (Erlang refuses a cookie file
    others can read; whoever reads it controls every node)."""
    write_secret(home / ".erlang.cookie", cookie, mode=0o400)
