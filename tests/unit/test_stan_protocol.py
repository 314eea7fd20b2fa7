"""The streaming protocol's messages against bytes encoded by stan.go's own `pb` package (gogo protobuf, v0.10.4,
the code nats-streaming-server shares): each fixture decodes to its fields, and the same fields encode to the same
bytes. The fixtures are tools/stan_fixtures' output."""

from __future__ import annotations

from typing import Any

import pytest

from bench_tasks.systems.stan import protocol as pb
from bench_tasks.systems.stan.requests import ServerSubjects, StanError, SubscriptionOptions, subscription_request

FIXTURES = {
    "ConnectRequest": "0a08636c69656e742d3112095f494e424f582e686218012206636f6e6e2d3128053058",
    "ConnectResponse": "0a0b5f5354414e2e7075622e58120b5f5354414e2e7375622e581a0d5f5354414e2e756e7375622e5822"
    "0d5f5354414e2e636c6f73652e5832105f5354414e2e737562636c6f73652e583a0c5f5354414e2e70696e672e58400548585001",
    "PubMsg": "0a08636c69656e742d311206677569642d311a0a7369786e696e65732e612a04000102ff3206636f6e6e2d31",
    "PubAck": "0a06677569642d311203626164",
    "MsgProto": "08ac02120a7369786e696e65732e61220309080728959a97ece39fe7cb1730013802",
    "Ack": "0a0a7369786e696e65732e6110ac02",
    "SubscriptionRequest": "0a08636c69656e742d31120a7369786e696e65732e611a016722085f494e424f582e7328800830"
    "1e3a01645003582a",
    "SubscriptionResponse": "120b5f5354414e2e61636b2e58",
    "UnsubscribeRequest": "0a08636c69656e742d31120a7369786e696e65732e611a0b5f5354414e2e61636b2e58220164",
    "CloseRequest": "0a08636c69656e742d31",
    "CloseResponse": "0a10756e6b6e6f776e20636c69656e744944",
    "Ping": "0a06636f6e6e2d31",
    "PingResponse": "0a18636c69656e7420686173206265656e207265706c61636564",
}

FIELDS: dict[str, dict[str, Any]] = {
    "ConnectRequest": {
        "clientID": "client-1",
        "heartbeatInbox": "_INBOX.hb",
        "protocol": 1,
        "connID": b"conn-1",
        "pingInterval": 5,
        "pingMaxOut": 88,
    },
    "ConnectResponse": {
        "pubPrefix": "_STAN.pub.X",
        "subRequests": "_STAN.sub.X",
        "unsubRequests": "_STAN.unsub.X",
        "closeRequests": "_STAN.close.X",
        "subCloseRequests": "_STAN.subclose.X",
        "pingRequests": "_STAN.ping.X",
        "pingInterval": 5,
        "pingMaxOut": 88,
        "protocol": 1,
    },
    "PubMsg": {
        "clientID": "client-1",
        "guid": "guid-1",
        "subject": "sixnines.a",
        "data": b"\x00\x01\x02\xff",
        "connID": b"conn-1",
    },
    "PubAck": {"guid": "guid-1", "error": "bad"},
    "MsgProto": {
        "sequence": 300,
        "subject": "sixnines.a",
        "data": b"\x09\x08\x07",
        "timestamp": 1700000000123456789,
        "redelivered": True,
        "redeliveryCount": 2,
    },
    "Ack": {"subject": "sixnines.a", "sequence": 300},
    "SubscriptionRequest": {
        "clientID": "client-1",
        "subject": "sixnines.a",
        "qGroup": "g",
        "inbox": "_INBOX.s",
        "maxInFlight": 1024,
        "ackWaitInSecs": 30,
        "durableName": "d",
        "startPosition": pb.START_POSITIONS["SequenceStart"],
        "startSequence": 42,
    },
    "SubscriptionResponse": {"ackInbox": "_STAN.ack.X"},
    "UnsubscribeRequest": {
        "clientID": "client-1",
        "subject": "sixnines.a",
        "inbox": "_STAN.ack.X",
        "durableName": "d",
    },
    "CloseRequest": {"clientID": "client-1"},
    "CloseResponse": {"error": "unknown clientID"},
    "Ping": {"connID": b"conn-1"},
    "PingResponse": {"error": "client has been replaced"},
}


def test_every_protocol_message_has_a_fixture() -> None:
    assert set(FIXTURES) == set(FIELDS) == set(pb.MESSAGES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_go_encoded_message_decodes_to_its_fields(name: str) -> None:
    decoded = getattr(pb, name).FromString(bytes.fromhex(FIXTURES[name]))
    assert {f: getattr(decoded, f) for f in FIELDS[name]} == FIELDS[name]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fields_encode_to_the_go_bytes(name: str) -> None:
    assert getattr(pb, name)(**FIELDS[name]).SerializeToString().hex() == FIXTURES[name]


def test_subscription_request_carries_the_start_position_and_its_argument() -> None:
    opts = SubscriptionOptions(
        queue="g", durable="d", max_in_flight=1024, ack_wait_s=30, start_position="sequence", start_sequence=42
    )
    req = subscription_request("client-1", "sixnines.a", "_INBOX.s", opts)
    assert req.SerializeToString().hex() == FIXTURES["SubscriptionRequest"]


def test_subscription_request_leaves_out_what_its_start_position_does_not_use() -> None:
    opts = SubscriptionOptions(start_position="first", start_sequence=42, start_time_delta_ns=5)
    req = subscription_request("c", "s", "i", opts)
    assert (req.startPosition, req.startSequence, req.startTimeDelta) == (pb.START_POSITIONS["First"], 0, 0)
    delta = subscription_request("c", "s", "i", SubscriptionOptions(start_position="time_delta", start_time_delta_ns=7))
    assert (delta.startPosition, delta.startTimeDelta) == (pb.START_POSITIONS["TimeDeltaStart"], 7)


def test_unknown_start_position_is_named() -> None:
    with pytest.raises(StanError, match="start position 'oldest'"):
        subscription_request("c", "s", "i", SubscriptionOptions(start_position="oldest"))


def test_connect_response_gives_the_request_subjects() -> None:
    resp = pb.ConnectResponse.FromString(bytes.fromhex(FIXTURES["ConnectResponse"]))
    subjects = ServerSubjects.from_response(resp)
    assert (subjects.pub_prefix, subjects.sub_close_requests, subjects.ping_interval_s) == (
        "_STAN.pub.X",
        "_STAN.subclose.X",
        5,
    )


def test_a_refused_connection_says_why() -> None:
    with pytest.raises(StanError, match="clientID already registered"):
        ServerSubjects.from_response(pb.ConnectResponse(error="clientID already registered"))
