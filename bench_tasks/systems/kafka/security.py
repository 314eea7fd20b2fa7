"""A Kafka listener's security: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL with PLAIN or SCRAM, its TLS material
and throw-away users made at start, the server settings, the storage-format arguments and the client's settings.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import BrokerError

_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"


_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


CLIENT_USER = "sixnines"  # the SASL user clients log in as; brokers log in to each other as "admin"


@dataclass(frozen=True)
class ListenerSecurity:
    """The client listener's security protocol (a matrix axis: `client.security`) and how a node sets it up.

    Inter-broker traffic uses the same listener and protocol, so replication pays what clients pay (as in a
    secured production cluster); the KRaft controller listener stays plaintext on loopback. TLS: a CA and a
    server certificate for 127.0.0.1/localhost are made at start (`tls.make_tls`) into the cluster's folder
    and used as PEM keystore/truststore. SASL: PLAIN users live in the listener's JAAS config; SCRAM users are
    written into the metadata when the storage is formatted (`--add-scram`), or, for ZooKeeper-era brokers, into
    ZooKeeper before they start (`zookeeper_scram_args`). Passwords are random per start."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(16), repr=False)
    client_password: str = field(default_factory=lambda: secrets.token_urlsafe(16), repr=False)

    @classmethod
    def of(cls, security: str | None, mechanism: str | None) -> ListenerSecurity:
        protocol = (security or "plaintext").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise BrokerError(f"client.security {security!r}: expected plaintext, ssl, sasl_plaintext or sasl_ssl")
        sasl = protocol.startswith("SASL")
        if mechanism is not None and mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise BrokerError(f"client.sasl_mechanism {mechanism!r}: expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        return cls(protocol, (mechanism or "PLAIN") if sasl else None)

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    @staticmethod
    def _tls_dir(workdir: Path) -> Path:
        return workdir / "tls"

    def prepare(self, workdir: Path, *hosts: str) -> None:
        """Make the TLS material (once per start) before any node's config points at it; the one certificate all
        nodes share names `hosts` (the listeners' addresses: one, or each node's own) besides localhost and
        127.0.0.1."""
        if self.tls:
            from ...brokers.tls import make_tls

            make_tls(self._tls_dir(workdir), tuple(dict.fromkeys(("localhost", "127.0.0.1", *hosts))))

    def server_settings(
        self, port: int, controller_port: int | None, workdir: Path, host: str = "127.0.0.1"
    ) -> dict[str, Any]:
        """The listener settings of one node; `controller_port` None: a ZooKeeper-era broker, which has no KRaft
        controller listener."""
        if self.protocol == "PLAINTEXT":
            return {}
        controller = "" if controller_port is None else f",CONTROLLER://{host}:{controller_port}"
        settings: dict[str, Any] = {
            "listeners": f"CLIENT://{host}:{port}{controller}",
            "advertised.listeners": f"CLIENT://{host}:{port}",
            "listener.security.protocol.map": f"CLIENT:{self.protocol}"
            + (",CONTROLLER:PLAINTEXT" if controller else ""),
            "inter.broker.listener.name": "CLIENT",
        }
        if self.tls:
            tls = self._tls_dir(workdir)
            settings |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(tls / "server.pem"),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(tls / "ca.pem"),
            }
        if self.mechanism is not None:
            prefix = f"listener.name.client.{self.mechanism.lower()}.sasl.jaas.config"
            login = {"username": "admin", "password": self.admin_password}
            if self.mechanism == "PLAIN":
                users = {"user_admin": self.admin_password, f"user_{CLIENT_USER}": self.client_password}
                jaas = jaas_config(_PLAIN_LOGIN, **login, **users)
            else:
                jaas = jaas_config(_SCRAM_LOGIN, **login)
            settings |= {
                "sasl.enabled.mechanisms": self.mechanism,
                "sasl.mechanism.inter.broker.protocol": self.mechanism,
                prefix: jaas,
            }
        return settings

    def format_args(self) -> list[str]:
        """SCRAM credentials for the storage tool: they must be in the metadata before the brokers start. They
        hold passwords: only ever passed through a private argument file (`tools.format_storage`)."""
        if self.mechanism is None or not self.mechanism.startswith("SCRAM"):
            return []
        users = (("admin", self.admin_password), (CLIENT_USER, self.client_password))
        return [arg for name, pw in users for arg in ("--add-scram", f"{self.mechanism}=[name={name},password={pw}]")]

    def zookeeper_scram_args(self, zookeeper: str) -> list[list[str]]:
        """ZooKeeper-era brokers read SCRAM credentials from ZooKeeper: Kafka's ConfigCommand writes them there before
        the brokers start (the brokers log in to each other as `admin`), one run per user. They hold passwords: only
        ever passed through a private argument file."""
        if self.mechanism is None or not self.mechanism.startswith("SCRAM"):
            return []
        users = (("admin", self.admin_password), (CLIENT_USER, self.client_password))
        return [
            [
                *("--zookeeper", zookeeper, "--alter", "--entity-type", "users", "--entity-name", name),
                *("--add-config", f"{self.mechanism}=[password={password}]"),
            ]
            for name, password in users
        ]

    def client_config(self, workdir: Path) -> dict[str, str]:
        if self.protocol == "PLAINTEXT":
            return {}
        config = {"security.protocol": self.protocol}
        if self.tls:
            config["ssl.ca.location"] = str(self._tls_dir(workdir) / "ca.pem")
        if self.mechanism is not None:
            config |= {
                "sasl.mechanism": self.mechanism,
                "sasl.username": CLIENT_USER,
                "sasl.password": self.client_password,
            }
        return config

    def describe(self) -> dict[str, Any]:
        """What the context records: protocol, mechanism, user, where TLS came from; never a password."""
        if self.protocol == "PLAINTEXT":
            return {"protocol": "PLAINTEXT"}
        facts: dict[str, Any] = {"protocol": self.protocol, "inter_broker": f"same listener ({self.protocol})"}
        if self.tls:
            facts["tls"] = "PEM CA + server certificate (listener address, 127.0.0.1, localhost) by `cryptography`"
        if self.mechanism is not None:
            facts |= {"sasl_mechanism": self.mechanism, "sasl_username": CLIENT_USER}
        return facts


JAAS_MODULE = {"PLAIN": _PLAIN_LOGIN, "SCRAM-SHA-256": _SCRAM_LOGIN, "SCRAM-SHA-512": _SCRAM_LOGIN}


def jaas_config(module: str, **options: str) -> str:
    """A JAAS login line (`sasl.jaas.config`) with each option quoted as Kafka's parser reads it
    (java.io.StreamTokenizer: inside quotes a backslash escapes the next character). A quote or backslash in a
    user name or password is escaped; a line break cannot be carried at all, so it is refused, naming the option
    (never its value)."""
    quoted = []
    for name, value in options.items():
        if "\n" in value or "\r" in value:
            raise BrokerError(f"SASL {name}: a line break cannot be carried in a JAAS config; choose another value")
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        quoted.append(f'{name}="{escaped}"')
    return f"{module} required {' '.join(quoted)};"
