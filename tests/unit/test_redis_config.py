"""Redis settings, the redis.conf each node is given, releases by name and the client's commands (no server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from bench_tasks.errors import BrokerError
from bench_tasks.systems.redis.client import (
    connection_kwargs,
    entries_of,
    xack_command,
    xadd_command,
    xreadgroup_command,
)
from bench_tasks.systems.redis.nodes import RedisServers, cell_password, node_directives, render_config
from bench_tasks.systems.redis.settings import RedisBroker, RedisClient, RedisStream, measurement_problem


def test_primary_config_is_harness_owned_then_defaults_then_native() -> None:
    broker = RedisBroker(appendonly=True, server={"maxmemory": "1gb", "save": "60 1000"})
    text = render_config(node_directives(broker, "127.0.0.1", 7001, Path("/w/n1"), None, "pw"))
    assert text.splitlines() == [
        "bind 127.0.0.1",
        "port 7001",
        "daemonize no",
        "protected-mode yes",
        "dir /w/n1",
        'logfile ""',
        "appendonly yes",
        "requirepass pw",
        "appendfsync everysec",
        "save 60 1000",
        "repl-diskless-sync-delay 0",
        "maxmemory 1gb",
        'rename-command MODULE ""',
        'rename-command DEBUG ""',
    ]


def test_replica_follows_the_primary_and_a_namespace_host_is_not_protected() -> None:
    broker = RedisBroker(replicas=1, server={"requirepass": "s3cret", "rename-command": ["FLUSHALL x1", "KEYS x2"]})
    directives = node_directives(broker, "10.88.0.2", 7002, Path("/w/n2"), 7001, cell_password(broker))
    assert directives["replicaof"] == "10.88.0.2 7001"
    assert directives["protected-mode"] is False
    assert directives["masterauth"] == "s3cret"
    assert directives["save"] == ""
    assert "appendfsync" not in directives
    lines = render_config(directives).splitlines()
    assert "rename-command FLUSHALL x1" in lines and "rename-command KEYS x2" in lines
    assert 'rename-command MODULE ""' in lines and "requirepass s3cret" in lines  # the matrix's password is the cell's
    assert 'save ""' in lines and "appendonly no" in lines


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        ({"server": {"port": 6379}}, "server.port: set by the harness"),
        ({"server": {"Daemonize": "yes"}}, "server.Daemonize: set by the harness"),
        ({"server": {"replicaof": "h 1"}}, "use broker.replicas"),
        ({"server": {"appendfsync": "always"}}, "use broker.appendfsync"),
        ({"server": {"max memory": 1}}, "not a redis.conf directive name"),
        ({"server": {"masterauth": "x"}}, "server.masterauth: set by the harness"),
        ({"server": {"user": "alice on >pw ~* +@all"}}, "server.user: set by the harness"),
        ({"server": {"enable-module-command": "yes"}}, "server.enable-module-command: set by the harness"),
        ({"server": {"loadmodule": "/tmp/evil.so"}}, "server.loadmodule: set by the harness"),
        ({"server": {"rename-command": ["module MODULE"]}}, "server.rename-command: module is renamed away"),
        ({"appendfsync": "always"}, "appendfsync 'always' needs appendonly: true"),
        ({"appendonly": True, "appendfsync": "sometimes"}, "appendfsync"),
        ({"stream": {"maxlen": 10}}, "stream: settings of mode 'streams'"),
        ({"mode": "streams", "stream": {"maxlen": 0}}, "maxlen"),
        ({"replicas": 5}, "replicas"),
        ({"mode": "queue"}, "mode"),
        ({"persistence": "aof"}, "persistence"),
    ],
)
def test_a_bad_broker_setting_is_named(settings: dict, names: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(names)):
        RedisBroker(**settings)


def test_a_bad_client_setting_is_named() -> None:
    with pytest.raises(ValidationError, match=r"connect\.decode_responses: set by the harness"):
        RedisClient(connect={"decode_responses": True})
    with pytest.raises(ValidationError, match=r"connect\.protocol"):
        RedisClient(connect={"protocol": 3})
    with pytest.raises(ValidationError, match="read_count"):
        RedisClient(read_count=0)


def test_what_a_reply_survives_is_derived_and_recorded() -> None:
    assert RedisBroker().fsync == "off"
    assert RedisBroker(appendonly=True).fsync == "everysec"
    assert RedisBroker(appendonly=True, appendfsync="always").fsync == "always"


def test_measurements_each_mode_can_run() -> None:
    pubsub, streams = RedisBroker(), RedisBroker(mode="streams")
    assert "needs broker.mode 'streams'" in (measurement_problem(pubsub, "publish") or "")
    assert "broker.mode 'pubsub'" in (measurement_problem(streams, "rtt") or "")
    for broker in (pubsub, streams):
        assert measurement_problem(broker, "e2e") is None and measurement_problem(broker, "chain") is None
    assert measurement_problem(streams, "publish") is None and measurement_problem(pubsub, "rtt") is None


def test_an_old_release_is_configured_with_what_it_has(tmp_path: Path) -> None:
    """Redis 3.2 has no MODULE to rename away (renaming a command it lacks stops it at start), and its replicas
    follow with `slaveof`; 5.0 onwards renames both and says `replicaof`."""
    old = RedisServers("3.2.9", RedisBroker(replicas=1), tmp_path)._release_config()
    assert old == (["DEBUG"], "slaveof")
    assert RedisServers("5.0.6", RedisBroker(), tmp_path)._release_config() == (["MODULE", "DEBUG"], "replicaof")
    lines = render_config(node_directives(RedisBroker(), "127.0.0.1", 1, tmp_path, 2, "pw", *old)).splitlines()
    assert "slaveof 127.0.0.1 2" in lines and 'rename-command DEBUG ""' in lines
    assert not any("MODULE" in line or "replicaof" in line for line in lines)


def test_stream_commands() -> None:
    assert xadd_command("s", b"p", 1000) == ("XADD", "s", "MAXLEN", "~", 1000, "*", b"d", b"p")
    assert xadd_command("s", b"p", None) == ("XADD", "s", "*", b"d", b"p")
    read = xreadgroup_command("s", "g", "c1", RedisClient(read_count=10, block_ms=50, noack=True))
    assert read == ("XREADGROUP", "GROUP", "g", "c1", "COUNT", 10, "BLOCK", 50, "NOACK", "STREAMS", "s", ">")
    assert xack_command("s", "g", [b"1-0", b"1-1"]) == ("XACK", "s", "g", b"1-0", b"1-1")
    assert entries_of(None) == []
    assert entries_of([[b"s", [(b"1-0", [b"d", b"x"]), (b"1-1", [b"o", b"y", b"d", b"z"])]]]) == [
        (b"1-0", b"x"),
        (b"1-1", b"z"),
    ]
    with pytest.raises(BrokerError, match="without the b'd' field"):
        entries_of([[b"s", [(b"1-0", [b"o", b"y"])]]])


def test_connection_kwargs_layer_url_access_defaults_and_matrix() -> None:
    client = RedisClient(connect={"socket_keepalive": True, "socket_connect_timeout": 2})
    kwargs = connection_kwargs("redis://u:p@10.0.0.1:7000/0", client, "p0-0", {"password": "from-connection"})
    assert kwargs["host"] == "10.0.0.1" and kwargs["port"] == 7000 and kwargs["username"] == "u"
    assert kwargs["password"] == "from-connection"
    assert kwargs["socket_timeout"] is None and kwargs["socket_connect_timeout"] == 2
    assert kwargs["socket_keepalive"] is True and kwargs["client_name"] == "p0-0" and kwargs["protocol"] == 2


def test_the_documented_settings_are_valid() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "redis.md").read_text()
    (example,) = [b for b in re.findall(r"```yaml\n(.*?)```", doc, flags=re.S) if "redis_settings" in b]
    raw = yaml.safe_load(example)
    broker, client = RedisBroker(**raw["broker"]), RedisClient(**raw["client"])
    assert broker.fsync == "always" and broker.replicas == 1 and broker.stream.maxlen == 100_000
    shown = {*raw["broker"], *raw["broker"]["stream"], *raw["client"]}
    every = {*RedisBroker.model_fields, *RedisStream.model_fields, *RedisClient.model_fields}
    assert shown == every, f"not shown in docs/redis.md: {sorted(every - shown)}"
    assert client.connect == {"socket_keepalive": True}
