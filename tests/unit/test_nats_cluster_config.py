"""The config each node of a 3-node NATS cluster is given, and the small helpers around it (no server started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_tasks.errors import BrokerError
from bench_tasks.systems.nats.cluster import (
    NatsCluster,
    NodePorts,
    cluster_settings,
    followers_waited_for,
    node_index,
    servers_of,
)
from bench_tasks.systems.nats.server import render_config
from bench_tasks.systems.nats.settings import NatsBroker

PORTS = [NodePorts(4001, 6001, 8001), NodePorts(4002, 6002, 8002), NodePorts(4003, 6003, 8003)]
R3 = NatsBroker(mode="jetstream", storage="file", servers=3, replicas=3)


def test_each_node_routes_to_the_other_two_in_one_named_cluster() -> None:
    for index in (1, 2, 3):
        settings = cluster_settings(index, PORTS, Path(f"/s/n{index}"), R3)
        me = PORTS[index - 1]
        assert settings["server_name"] == f"n{index}"
        assert settings["listen"] == f"127.0.0.1:{me.client}"
        assert settings["http"] == f"127.0.0.1:{me.monitor}"
        assert settings["cluster"] == {
            "name": "sixnines",
            "listen": f"127.0.0.1:{me.cluster}",
            "routes": [f"nats-route://127.0.0.1:{p.cluster}" for p in PORTS if p != me],
        }
        assert settings["jetstream"] == {"store_dir": f"/s/n{index}"}


def test_rendered_config_is_what_nats_server_reads() -> None:
    text = render_config(cluster_settings(2, PORTS, Path("/s/n2"), R3))
    assert text.splitlines() == [
        'server_name: "n2"',
        'listen: "127.0.0.1:4002"',
        'http: "127.0.0.1:8002"',
        'cluster: {"name": "sixnines", "listen": "127.0.0.1:6002", '
        '"routes": ["nats-route://127.0.0.1:6001", "nats-route://127.0.0.1:6003"]}',
        'jetstream: {"store_dir": "/s/n2"}',
    ]


def test_sync_interval_and_native_options_reach_every_node() -> None:
    broker = NatsBroker(mode="jetstream", servers=3, sync_interval="always", server={"max_payload": 2097152})
    settings = cluster_settings(3, PORTS, Path("/s"), broker)
    assert settings["jetstream"]["sync_interval"] == "always"
    assert settings["max_payload"] == 2097152


def test_helpers() -> None:
    assert [node_index(n) for n in ("n1", "n3", "", "x2", "n")] == [1, 3, None, None, None]
    assert servers_of("nats://a:1,nats://b:2, nats://c:3") == ["nats://a:1", "nats://b:2", "nats://c:3"]
    assert servers_of("nats://a:1") == ["nats://a:1"]


def test_a_cluster_is_jetstream_only(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="JetStream only"):
        NatsCluster("2.15.1", NatsBroker(mode="core"), tmp_path)


def test_a_cluster_on_a_namespace_address_listens_and_routes_there() -> None:
    settings = cluster_settings(1, PORTS, Path("/s/n1"), R3, host="10.99.0.2")
    assert (settings["listen"], settings["http"]) == ("10.99.0.2:4001", "10.99.0.2:8001")
    assert settings["cluster"]["listen"] == "10.99.0.2:6001"
    assert settings["cluster"]["routes"] == ["nats-route://10.99.0.2:6002", "nats-route://10.99.0.2:6003"]


def test_a_follower_current_in_raft_but_offline_to_the_leader_is_waited_for() -> None:
    """The meta leader's `/jsz` replicas, as nats-server reports them: placement skips a peer marked offline even
    when it is current, so readiness waits until neither follower is."""
    followers = {"n2", "n3"}
    ready = [{"name": "n2", "current": True, "active": 1}, {"name": "n3", "current": True, "active": 1}]
    assert followers_waited_for(ready, followers) == ""
    offline = [ready[0], {"name": "n3", "current": True, "offline": True}]
    assert followers_waited_for(offline, followers) == "no follower offline (offline: ['n3'])"
    behind = [ready[0], {"name": "n3", "current": False}]
    assert followers_waited_for(behind, followers) == "both followers current (current: ['n2'])"
    assert followers_waited_for([], followers) == "both followers current (current: [])"
