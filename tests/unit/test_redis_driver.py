"""The Redis system's parts that need no server: route and rtt channel names, stream ids as offsets, the cell's
checks, its label, and what the core asks of the registered system."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bench_tasks.systems import system
from bench_tasks.systems.redis.driver import (
    _Batch,
    _payloads,
    entry_offset,
    key_for,
    reply_channel,
    request_channel,
    route_name,
)
from bench_tasks.systems.redis.settings import RedisCell
from tests.recorded_releases import recorded


def cell(measurement: str = "e2e", broker: dict[str, Any] | None = None, **workload: Any) -> RedisCell:
    return RedisCell.model_validate(
        {
            "system": "redis",
            "version": "latest",
            "workload": {"message_size_bytes": 256, "rate_per_s": 10, "measure_s": 1, **workload},
            "measurement": measurement,
            "broker": broker or {},
        }
    )


def test_routes_and_rtt_channels_are_named_from_the_cell() -> None:
    assert key_for("abc") == "sixnines.abc" and key_for("abc", "hop2") == "sixnines.abc.hop2"
    assert route_name(cell("chain", message_size_bytes=256), "abc") == "sixnines.abc.hop2"
    request = request_channel("sixnines.abc", "sixnines-p0-3")
    assert request == "sixnines.abc.req.sixnines-p0-3"
    assert reply_channel("sixnines.abc", request.encode()) == b"sixnines.abc.rep.sixnines-p0-3"


def test_stream_ids_become_increasing_offsets() -> None:
    ids = [b"1700000000000-0", b"1700000000000-1", b"1700000000000-1048575", b"1700000000001-0"]
    offsets = [entry_offset(i) for i in ids]
    assert offsets == sorted(offsets) and len(set(offsets)) == 4
    assert offsets[-1] < 2**63  # fits the lake's int64


def test_a_read_hands_over_only_messages() -> None:
    pushes = [[b"message", b"ch", b"one"], [b"subscribe", b"ch", 1], [b"message", b"ch", b"two"]]
    assert _payloads(pushes) == [b"one", b"two"]
    batch = _Batch([b"a", b"b"], [5, 6])
    assert batch.partitions() == [0, 0] and batch.offsets() == [5, 6]
    assert _Batch([b"a"]).partitions() is None and _Batch([b"a"]).offsets() is None


@pytest.mark.parametrize(
    ("measurement", "broker", "workload", "named"),
    [
        ("e2e", {"mode": "pubsub"}, {"consumers": 2}, "workload.consumers 2: pub/sub delivers every message"),
        ("rtt", {"mode": "pubsub"}, {"consumers": 3}, "the responders would each get it"),
        ("chain", {"mode": "pubsub"}, {"relays": 2}, "workload.relays 2"),
        ("publish", {"mode": "pubsub"}, {}, "measurement 'publish' needs broker.mode 'streams'"),
        ("rtt", {"mode": "streams"}, {}, "measurement 'rtt' is request/reply over pub/sub"),
        ("e2e", {"mode": "streams"}, {"prefill_messages": 10}, "prefill_messages and lagging_consumers"),
    ],
)
def test_what_redis_cannot_do_is_refused_by_field(
    measurement: str, broker: dict[str, Any], workload: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValidationError, match=named):
        cell(measurement, broker, **workload)


def test_a_streams_group_shares_messages_between_consumers() -> None:
    assert cell("e2e", {"mode": "streams"}, consumers=3).workload.consumers == 3


def test_the_registered_system_labels_and_acknowledges_by_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded(monkeypatch, tmp_path, "redis", ["6.2.14", "7.0.15", "5.0.6"])
    redis = system("redis")
    assert redis.versions == ("7.0.15", "6.2.14", "5.0.6") and redis.resolve_version("latest") == "7.0.15"
    assert redis.label(cell()) == "redis/pubsub"
    streams = cell("publish", {"mode": "streams", "appendonly": True, "appendfsync": "always", "replicas": 1})
    assert redis.label(streams) == "redis/streams R2 aof=always maxlen~100000"
    assert redis.group_tag(streams) == "streams"
    assert redis.sends_acknowledged({"mode": "streams"}) and not redis.sends_acknowledged({"mode": "pubsub"})
    assert redis.delivery_guaranteed(streams.model_dump(mode="json"))
    assert not redis.delivery_guaranteed(cell().model_dump(mode="json"))
    assert redis.acked_metric(cell("rtt").model_dump(mode="json")) == "rtt"
    assert redis.acked_metric(cell().model_dump(mode="json")) is None
    assert redis.client_libraries == ("redis", "hiredis")


def test_a_cell_dump_validates_again() -> None:
    """What the runner writes to the work folder and reads back in the driving process must validate unchanged."""
    for original in (cell(), cell("e2e", {"mode": "streams", "stream": {"maxlen": 5}})):
        assert RedisCell.model_validate(original.model_dump(mode="json")) == original


def test_an_airflow_connection_becomes_a_url_without_secrets_and_redis_py_credentials() -> None:
    import json

    from bench_tasks.brokers.connections import BrokerConnection
    from bench_tasks.errors import BrokerError
    from bench_tasks.systems.redis.access import client_access

    acl = client_access(BrokerConnection("r", "redis", "h", 6380, "bob", "pw", "2"))
    assert acl.address == "redis://h:6380/2"
    assert acl.client == {"username": "bob", "password": "pw"} and acl.described["auth"] == "acl user/password"
    tls = client_access(BrokerConnection("r", "redis", "h", None, None, "pw", extra={"tls_ca_file": "/ca.pem"}))
    assert tls.address == "rediss://h:6379/0" and tls.client == {"password": "pw", "ssl_ca_certs": "/ca.pem"}
    assert tls.described["auth"] == "password" and "pw" not in json.dumps([acl.described, tls.described])
    assert client_access(BrokerConnection("r", "rediss", "h")).address == "rediss://h:6379/0"
    with pytest.raises(BrokerError, match="no host"):
        client_access(BrokerConnection("r"))
    with pytest.raises(BrokerError, match="one Redis host"):
        client_access(BrokerConnection("r", "redis", "a,b"))


def test_an_external_cell_keeps_the_servers_own_persistence_and_dumps_valid() -> None:
    base = {
        "system": "redis",
        "version": "external",
        "brokers": "external",
        "connection": "my_redis",
        "workload": {"message_size_bytes": 256, "rate_per_s": 10, "measure_s": 1},
        "measurement": "e2e",
    }
    external = RedisCell.model_validate({**base, "broker": {"mode": "streams"}})
    assert RedisCell.model_validate(external.model_dump(mode="json")) == external
    with pytest.raises(ValidationError, match=r"broker\.replicas: an external Redis runs as it is configured"):
        RedisCell.model_validate({**base, "broker": {"replicas": 1}})
