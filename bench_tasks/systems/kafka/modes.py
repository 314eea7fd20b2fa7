"""Which metadata mode a Kafka release runs in, and what a release line cannot do, so that a matrix is refused
per release at validation instead of failing when its cell starts.

KRaft was declared ready for production in 3.3 (KIP-833): releases from 3.3 on run as combined KRaft nodes
(`cluster.py`). Older releases run as ZooKeeper-era brokers with a ZooKeeper of their own, started from the
release's own classpath (its `org.apache.zookeeper` dependency, `zookeeper.py`). Both modes run every listener
security, fault and leader placement, with these exceptions, each refused with its reason:

- SCRAM under KRaft came in 3.5 (KIP-554's KRaft half; the storage tool's `--add-scram`, KIP-900): 3.3 and 3.4
  have no way to create SCRAM users, so `client.sasl_mechanism: SCRAM-*` is refused for them.
- TLS listeners are set up with PEM keystores and truststores holding an unencrypted key (`security.py`). Kafka
  reads PEM stores from 2.7 on (KIP-651), but until 3.2 only with an encrypted key and its password (the broker
  refuses to start: "SSL PEM key store is specified, but key password is not specified"): `client.security: ssl |
  sasl_ssl` is refused before 3.3.
- A `restart` fault kills a node and starts it again at once. A ZooKeeper-era broker started again while ZooKeeper
  still holds the killed process's registration (`/brokers/ids/N`, an ephemeral node kept until its session
  expires: `zookeeper.session.timeout.ms`, 18 s by default) stops with "node already exists and owner … does not
  match current session": `restart` is refused before 3.3 (`kill` and `stall` are not).
- A ZooKeeper-era cluster runs its nodes on one host: its ZooKeeper is a single process the brokers share, so one
  network namespace per node (`workload.placement.broker` as a list, which the `partition` and `bandwidth` faults
  need) is refused for releases before 3.3.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Literal

KRAFT_FROM = (3, 3)
SCRAM_IN_KRAFT_FROM = (3, 5)
PEM_STORES_FROM = (2, 7)
UNENCRYPTED_PEM_KEYS_FROM = (3, 3)
Mode = Literal["kraft", "zookeeper"]


def release_key(version: str) -> tuple[int, ...]:
    """The numbers of a release (`4.3.2` -> (4, 3, 2)), compared with the lines above."""
    return tuple(int(part) for part in re.findall(r"\d+", version))


def mode_of(version: str) -> Mode:
    """KRaft from 3.3 on, ZooKeeper before."""
    return "kraft" if release_key(version) >= KRAFT_FROM else "zookeeper"


def refusals(
    version: str, security: str | None, sasl_mechanism: str | None, node_hosts: bool, fault_actions: Collection[str]
) -> list[str]:
    """Why a cell of release `version` cannot run as the matrix asks (empty: it can). `security` and
    `sasl_mechanism`: the cell's client settings; `node_hosts`: it puts each node on a host of its own;
    `fault_actions`: what its faults do."""
    problems = []
    release, mode = release_key(version), mode_of(version)
    scram = (sasl_mechanism or "").startswith("SCRAM")
    if scram and mode == "kraft" and release < SCRAM_IN_KRAFT_FROM:
        problems.append(
            f"client.sasl_mechanism {sasl_mechanism!r}: Kafka {version} runs in KRaft mode, which has SCRAM users "
            "from 3.5 on (KIP-554); use PLAIN, or a release from 3.5"
        )
    if (security or "").endswith("ssl") and release < UNENCRYPTED_PEM_KEYS_FROM:
        stores = "no PEM keystore (KIP-651, from 2.7)" if release < PEM_STORES_FROM else "a PEM key only encrypted"
        problems.append(
            f"client.security {security!r}: Kafka {version} reads {stores}, and the harness makes its TLS material "
            "as PEM with an unencrypted key, which Kafka reads from 3.3; use a release from 3.3"
        )
    if "restart" in fault_actions and mode == "zookeeper":
        problems.append(
            f"faults: restart: a Kafka {version} broker (ZooKeeper mode, before 3.3) started again at once refuses to "
            "start while ZooKeeper still holds the killed process's registration (/brokers/ids/N, until its session "
            "expires: zookeeper.session.timeout.ms); use kill, or a release from 3.3"
        )
    if node_hosts and mode == "zookeeper":
        problems.append(
            f"workload.placement.broker: Kafka {version} runs with ZooKeeper (releases before 3.3), one process its "
            "nodes share on one host; use a release from 3.3 (KRaft) to give each node a host of its own"
        )
    return problems


# Stopped together, the last KRaft voter standing has often just been elected, and resigning it waits 5 s (Kafka's
# own bound) for voters that already exited: 5.5 s of every 3-node cell's teardown. Nobody is left to tell.
LAST_NODE_GRACE_S = 1.0
