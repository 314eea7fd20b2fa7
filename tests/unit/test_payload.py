"""bench_tasks.load.payload: the 32-byte message header and the incompressible filler."""

from __future__ import annotations

import itertools
import struct
import zlib

import pytest

from bench_tasks.errors import PayloadError
from bench_tasks.load.payload import (
    HEADER_SCHEMA_VERSION,
    HEADER_SIZE,
    MAGIC,
    RELAYED_MIN_SIZE,
    Header,
    PayloadFactory,
    decode_header,
    decode_headers,
    decode_relay_stamp,
    decode_relay_stamps,
    relay,
    stamp_relay_sent,
)

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


def test_header_size_is_32() -> None:
    assert HEADER_SIZE == 32


@pytest.mark.parametrize(
    "header",
    [
        Header(producer_id=7, seq=123, intended_ns=1_000_000_007, sent_ns=1_000_000_950, hop=0),
        Header(producer_id=0, seq=0, intended_ns=0, sent_ns=0, hop=0),
        Header(producer_id=U32_MAX, seq=U64_MAX, intended_ns=U64_MAX, sent_ns=U64_MAX, hop=255),
        Header(producer_id=3, seq=2**40 + 5, intended_ns=17, sent_ns=18, hop=2),
    ],
)
def test_round_trip(header: Header) -> None:
    factory = PayloadFactory(256)
    message = factory.make(header.producer_id, header.seq, header.intended_ns, header.sent_ns, hop=header.hop)
    assert decode_header(message) == header


def test_layout_is_little_endian_and_fixed() -> None:
    message = PayloadFactory(64).make(0x01020304, 5, 6, 7, hop=9)
    assert message[:2] == MAGIC == b"S9"
    assert message[2] == HEADER_SCHEMA_VERSION == 2
    assert message[3] == 9
    assert message[4:8] == bytes([4, 3, 2, 1])
    assert struct.unpack_from("<QQQ", message, 8) == (5, 6, 7)


@pytest.mark.parametrize("size", [32, 33, 64, 1024, 4096, 65_536, 1_048_576])
def test_message_length_is_exactly_size_bytes(size: int) -> None:
    factory = PayloadFactory(size)
    for seq in (0, 1, 67, 4095, 4096, 10**9):
        message = factory.make(1, seq, 2, 3)
        assert isinstance(message, bytes)
        assert len(message) == size
        assert decode_header(message).seq == seq


def test_header_only_message() -> None:
    message = PayloadFactory(32).make(4, 5, 6, 7)
    assert decode_header(message) == Header(4, 5, 6, 7, 0)


@pytest.mark.parametrize("size", [0, 1, 31, -1])
def test_size_below_header_raises(size: int) -> None:
    with pytest.raises(PayloadError, match="below the 32 B header"):
        PayloadFactory(size)


def test_bad_magic_raises() -> None:
    message = bytearray(PayloadFactory(64).make(1, 2, 3, 4))
    message[:2] = b"XX"
    with pytest.raises(PayloadError, match="bad magic"):
        decode_header(bytes(message))


@pytest.mark.parametrize("length", [0, 1, 31])
def test_short_data_raises(length: int) -> None:
    message = PayloadFactory(64).make(1, 2, 3, 4)
    with pytest.raises(PayloadError, match="shorter than the 32 B header"):
        decode_header(message[:length])


@pytest.mark.parametrize("version", [0, 1, 3, 255])
def test_wrong_schema_version_raises(version: int) -> None:
    message = bytearray(PayloadFactory(64).make(1, 2, 3, 4))
    message[2] = version
    with pytest.raises(PayloadError, match=f"header schema {version} is not supported"):
        decode_header(bytes(message))


def test_decode_accepts_memoryview_and_ignores_trailing_bytes() -> None:
    message = PayloadFactory(100).make(1, 2, 3, 4, hop=1)
    assert decode_header(memoryview(message)) == Header(1, 2, 3, 4, 1)
    assert decode_header(message[:32]) == Header(1, 2, 3, 4, 1)


def test_filler_differs_between_consecutive_seqs() -> None:
    factory = PayloadFactory(1024)
    fillers = [factory.make(1, seq, 0, 0)[HEADER_SIZE:] for seq in range(64)]
    for a, b in itertools.pairwise(fillers):
        assert a != b
    assert len(set(fillers)) == len(fillers)


def test_filler_differs_between_factories() -> None:
    assert PayloadFactory(256).make(1, 1, 0, 0)[HEADER_SIZE:] != PayloadFactory(256).make(1, 1, 0, 0)[HEADER_SIZE:]


def test_single_large_message_is_incompressible() -> None:
    message = PayloadFactory(65_536).make(1, 1, 0, 0)
    assert len(zlib.compress(message, 9)) > 0.9 * len(message)


@pytest.mark.parametrize("size", [128, 1024, 16_384])
def test_stream_of_messages_is_not_compressible(size: int) -> None:
    factory = PayloadFactory(size)
    stream = b"".join(factory.make(1, seq, seq, seq) for seq in range(65_536 // size))
    assert len(stream) == 65_536
    # The headers are regular by design; the random filler of every message must survive compression.
    filler_bytes = len(stream) * (size - HEADER_SIZE) / size
    assert len(zlib.compress(stream, 9)) > 0.95 * filler_bytes


def test_relay_keeps_the_producers_header_and_adds_its_own_times() -> None:
    original = PayloadFactory(64).make(7, 42, 1_000, 1_100)
    forwarded = stamp_relay_sent(relay(original, received_ns=5_000), sent_ns=5_250)
    assert len(forwarded) == len(original)
    assert decode_header(forwarded) == Header(7, 42, 1_000, 1_100, hop=1)
    assert decode_relay_stamp(forwarded) == (5_000, 5_250)
    assert forwarded[RELAYED_MIN_SIZE:] == original[RELAYED_MIN_SIZE:]  # filler beyond the stamp untouched


def test_relay_refuses_a_message_too_short_for_its_stamp() -> None:
    with pytest.raises(PayloadError, match="48 B"):
        relay(PayloadFactory(40).make(1, 2, 3, 4), received_ns=9)


def test_batch_stamps_each_message_when_it_is_pulled() -> None:
    ticks = itertools.count(1000, 7)
    factory = PayloadFactory(100, seed=1)
    batch = factory.batch(4, range(10, 13), [500, 600, 700], lambda: next(ticks))
    first = next(batch)
    assert next(ticks) == 1007  # nothing else read the clock: the second message is not stamped yet
    rest = list(batch)
    assert [(seq, sent) for seq, sent, _ in (first, *rest)] == [(10, 1000), (11, 1014), (12, 1021)]
    for seq, sent, message in (first, *rest):
        assert len(message) == 100
        assert decode_header(message) == Header(4, seq, 500 + 100 * (seq - 10), sent, 0)


def test_batch_filler_is_fresh_for_every_message() -> None:
    messages = [m for _, _, m in PayloadFactory(1024, seed=2).batch(0, range(50), range(50), lambda: 0)]
    fillers = {m[HEADER_SIZE:] for m in messages}
    assert len(fillers) == 50
    assert len(zlib.compress(b"".join(fillers))) > 0.99 * 50 * (1024 - HEADER_SIZE)


def test_decode_headers_matches_decode_header_and_refuses_what_is_not_ours() -> None:
    factory = PayloadFactory(64)
    good = [factory.make(p, s, 10 * s, 10 * s + 3, hop=s % 3) for p, s in ((1, 1), (2, 5), (3, 9))]
    bad = [b"short", b"P9" + bytes(62), struct.pack("<2sB", MAGIC, 1) + bytes(61)]
    headers, ours = decode_headers([good[0], bad[0], good[1], bad[1], bad[2], good[2]])
    assert ours.tolist() == [True, False, True, False, False, True]
    for row, message in zip(headers[ours], good, strict=True):
        h = decode_header(message)
        fields = (row["producer_id"], row["seq"], row["intended_ns"], row["sent_ns"], row["hop"])
        assert fields == (h.producer_id, h.seq, h.intended_ns, h.sent_ns, h.hop)


def test_decode_relay_stamps_in_bulk() -> None:
    message = relay(PayloadFactory(64).make(1, 2, 3, 4), received_ns=70)
    stamped = stamp_relay_sent(message, 80)
    assert decode_relay_stamps([stamped, b"x" * 40]).tolist() == [[70, 80], [-1, -1]]
