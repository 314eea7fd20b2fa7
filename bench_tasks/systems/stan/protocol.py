"""The NATS Streaming wire protocol's messages (`pb/protocol.proto` of github.com/nats-io/stan.go, package `pb`).

The messages are declared here as data (name, field number, type, as the .proto gives them) and built into
protobuf classes at import with the `protobuf` runtime, in a private descriptor pool: no generated `_pb2` file to
fall out of step with the runtime (the failure that rules out the 2019 PyPI client, docs/stan.md), and no protoc
at build time. Field names keep the .proto's spelling, so a message reads like the protocol's documentation.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_TYPES = {
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
    "bool": _F.TYPE_BOOL,
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "StartPosition": _F.TYPE_ENUM,
}

# StartPosition: where a new subscription begins.
START_POSITIONS: dict[str, int] = {
    "NewOnly": 0,
    "LastReceived": 1,
    "TimeDeltaStart": 2,
    "SequenceStart": 3,
    "First": 4,
}

# message -> (field, number, type), in the .proto's order.
MESSAGES: dict[str, tuple[tuple[str, int, str], ...]] = {
    "PubMsg": (
        ("clientID", 1, "string"),
        ("guid", 2, "string"),
        ("subject", 3, "string"),
        ("reply", 4, "string"),
        ("data", 5, "bytes"),
        ("connID", 6, "bytes"),
        ("sha256", 10, "bytes"),
    ),
    "PubAck": (("guid", 1, "string"), ("error", 2, "string")),
    "MsgProto": (
        ("sequence", 1, "uint64"),
        ("subject", 2, "string"),
        ("reply", 3, "string"),
        ("data", 4, "bytes"),
        ("timestamp", 5, "int64"),
        ("redelivered", 6, "bool"),
        ("redeliveryCount", 7, "uint32"),
        ("CRC32", 10, "uint32"),
    ),
    "Ack": (("subject", 1, "string"), ("sequence", 2, "uint64")),
    "ConnectRequest": (
        ("clientID", 1, "string"),
        ("heartbeatInbox", 2, "string"),
        ("protocol", 3, "int32"),
        ("connID", 4, "bytes"),
        ("pingInterval", 5, "int32"),
        ("pingMaxOut", 6, "int32"),
    ),
    "ConnectResponse": (
        ("pubPrefix", 1, "string"),
        ("subRequests", 2, "string"),
        ("unsubRequests", 3, "string"),
        ("closeRequests", 4, "string"),
        ("error", 5, "string"),
        ("subCloseRequests", 6, "string"),
        ("pingRequests", 7, "string"),
        ("pingInterval", 8, "int32"),
        ("pingMaxOut", 9, "int32"),
        ("protocol", 10, "int32"),
        ("publicKey", 100, "string"),
    ),
    "Ping": (("connID", 1, "bytes"),),
    "PingResponse": (("error", 1, "string"),),
    "SubscriptionRequest": (
        ("clientID", 1, "string"),
        ("subject", 2, "string"),
        ("qGroup", 3, "string"),
        ("inbox", 4, "string"),
        ("maxInFlight", 5, "int32"),
        ("ackWaitInSecs", 6, "int32"),
        ("durableName", 7, "string"),
        ("startPosition", 10, "StartPosition"),
        ("startSequence", 11, "uint64"),
        ("startTimeDelta", 12, "int64"),
    ),
    "SubscriptionResponse": (("ackInbox", 2, "string"), ("error", 3, "string")),
    "UnsubscribeRequest": (
        ("clientID", 1, "string"),
        ("subject", 2, "string"),
        ("inbox", 3, "string"),
        ("durableName", 4, "string"),
    ),
    "CloseRequest": (("clientID", 1, "string"),),
    "CloseResponse": (("error", 1, "string"),),
}

PROTOCOL_ONE = 1  # the protocol level this client speaks: client PINGs, connection ids


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="sixnines/stan/protocol.proto", package="pb", syntax="proto3")
    enum = proto.enum_type.add(name="StartPosition")
    for name, number in START_POSITIONS.items():
        enum.value.add(name=name, number=number)
    for message, fields in MESSAGES.items():
        described = proto.message_type.add(name=message)
        for name, number, kind in fields:
            field = described.field.add(name=name, number=number, type=_TYPES[kind], label=_F.LABEL_OPTIONAL)
            if kind == "StartPosition":
                field.type_name = ".pb.StartPosition"
    return proto


def _classes() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()  # private: never clashes with another library's `pb` package
    pool.Add(_file())
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"pb.{name}")) for name in MESSAGES}


_BUILT = _classes()
PubMsg = _BUILT["PubMsg"]
PubAck = _BUILT["PubAck"]
MsgProto = _BUILT["MsgProto"]
Ack = _BUILT["Ack"]
ConnectRequest = _BUILT["ConnectRequest"]
ConnectResponse = _BUILT["ConnectResponse"]
Ping = _BUILT["Ping"]
PingResponse = _BUILT["PingResponse"]
SubscriptionRequest = _BUILT["SubscriptionRequest"]
SubscriptionResponse = _BUILT["SubscriptionResponse"]
UnsubscribeRequest = _BUILT["UnsubscribeRequest"]
CloseRequest = _BUILT["CloseRequest"]
CloseResponse = _BUILT["CloseResponse"]
