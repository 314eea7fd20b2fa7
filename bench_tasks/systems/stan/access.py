"""Reaching a NATS Streaming server the cell does not own: its embedded NATS server is reached like any NATS
server (the Airflow connection as nats-py arguments: `systems.nats.access`), and the cluster id to connect to is
the matrix's `broker.cluster_id` (required for external cells). What the server says it is comes from the
streaming layer's ConnectResponse (its protocol) and the embedded NATS server's INFO (its version); channels are
created on first use and left to the server's limits, so there are no routes to delete."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...brokers.connections import BrokerConnection, ClientAccess
from ...load.loop import run_precise
from ..nats.access import nats_access
from .settings import StanCell


def client_access(conn: BrokerConnection, spec: StanCell) -> ClientAccess:
    access = nats_access(conn)
    return ClientAccess(access.address, access.client, {**access.described, "cluster_id": spec.broker.cluster_id})


def ask_version(address: str, client: Mapping[str, Any], spec: StanCell) -> dict[str, Any]:
    return run_precise(_server_info(address, client, spec))


async def _server_info(address: str, client: Mapping[str, Any], spec: StanCell) -> dict[str, Any]:
    from .driver import StanDriver

    driver = StanDriver(address, spec, "info", client=client)
    try:
        conn = await driver.connect("sixnines-info")
        v = conn.nc.connected_server_version
        nats_version = f"{v.major}.{v.minor}.{v.patch}" + (f"-{v.prerelease}" if v.prerelease else "")
        protocol = conn.subjects.protocol
    finally:
        await driver.close()
    return {
        # The streaming protocol does not tell the server's release; its monitoring port would, but an external
        # server's is rarely reachable. Recorded: the embedded NATS server's version and the streaming protocol.
        "version": "unknown",
        "version_source": "the streaming server does not report its release to clients",
        "nats_server": nats_version,
        "streaming_protocol": protocol,
        "cluster_id": spec.broker.cluster_id,
    }
