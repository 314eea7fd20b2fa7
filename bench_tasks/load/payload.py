"""The message header every sixnines message carries, followed by random filler up to the message size.

The filler is fresh random bytes for every message, so compression cannot shrink it (seed 000) — not one
message, and not a batch of them either (a shared random pool would repeat across a batch). A message is
built in two steps so the costly part stays off the timed path: `prepare` (filler and header, before
the producer sleeps until the intended time) and `stamp` (writes sent_ns, right before the send).
A producer sending many messages per wake-up uses `batch`: one block of random filler for all of them,
and each message packed as it is pulled, with the clock read right then. Receivers decode many headers at
once (`decode_headers`), one numpy view over the batch instead of a Python object per message.
The header is fixed-size, little endian, and versioned so a reader can refuse what it does not understand.

Layout (32 bytes): magic b"S9" | schema u8 | hop u8 | producer_id u32 | seq u64 | intended_ns u64 | sent_ns u64
A relayed message (hop >= 1, the two-hop service chain of seed 002) keeps the producer's header untouched —
the original intended and sent times travel end to end — and carries the relay's own times right after it:
relay_received_ns u64 | relay_sent_ns u64 (16 bytes, overwriting filler; chain cells need >= 48-byte messages).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from ..core.header import (
    HEADER,
    HEADER_SCHEMA_VERSION,
    HEADER_SIZE,
    HOP_OFFSET,
    MAGIC,
    NO_RELAY,
    RELAY,
    RELAY_SENT_OFFSET,
    RELAYED_MIN_SIZE,
    SENT_FIELD,
    SENT_OFFSET,
)
from ..errors import PayloadError

# The header as a numpy record, for decoding a batch's headers in one view (same layout as HEADER).
HEADER_DTYPE = np.dtype(
    [
        ("magic", "S2"),
        ("schema", "u1"),
        ("hop", "u1"),
        ("producer_id", "<u4"),
        ("seq", "<u8"),
        ("intended_ns", "<u8"),
        ("sent_ns", "<u8"),
    ]
)
assert HEADER_DTYPE.itemsize == HEADER_SIZE
_NUMPY_FROM_BYTES = 16 * 1024  # numpy's generator is faster than random.randbytes for large fillers


class Header(NamedTuple):
    producer_id: int
    seq: int
    intended_ns: int
    sent_ns: int
    hop: int


class PayloadFactory:
    """Builds messages of exactly `size_bytes`: header, then incompressible filler."""

    def __init__(self, size_bytes: int, seed: int | None = None):
        if size_bytes < HEADER_SIZE:
            raise PayloadError(f"message size {size_bytes} B is below the {HEADER_SIZE} B header")
        self.size_bytes = size_bytes
        self._filler = size_bytes - HEADER_SIZE
        seed = seed if seed is not None else int.from_bytes(os.urandom(8), "little")
        self._random = random.Random(seed)
        self._numpy = np.random.default_rng(seed)

    def prepare(self, producer_id: int, seq: int, intended_ns: int, hop: int = 0) -> bytearray:
        """Header (sent_ns still 0) and fresh random filler; call before waiting for the intended time."""
        filler = (
            self._numpy.bytes(self._filler)
            if self._filler >= _NUMPY_FROM_BYTES
            else self._random.randbytes(self._filler)
        )
        buf = bytearray(HEADER_SIZE) + filler
        HEADER.pack_into(buf, 0, MAGIC, HEADER_SCHEMA_VERSION, hop, producer_id, seq, intended_ns, 0)
        return buf

    @staticmethod
    def stamp(buf: bytearray, sent_ns: int) -> bytes:
        """Write sent_ns into a prepared message: the only work between reading the clock and sending."""
        SENT_FIELD.pack_into(buf, SENT_OFFSET, sent_ns)
        return bytes(buf)

    def make(self, producer_id: int, seq: int, intended_ns: int, sent_ns: int, hop: int = 0) -> bytes:
        """prepare + stamp in one call, for code that has no timed path."""
        return self.stamp(self.prepare(producer_id, seq, intended_ns, hop), sent_ns)

    def batch(
        self, producer_id: int, seqs: Sequence[int], intended_ns: Sequence[int], clock: Callable[[], int]
    ) -> Iterator[tuple[int, int, bytes]]:
        """Messages `seqs` (intended at `intended_ns`) as (seq, sent_ns, message), each stamped with `clock()`
        when it is pulled: a consumer of this iterator that hands each message to the client as soon as it gets
        it sends every message at its own stamped time. The filler of all of them is drawn in one call."""
        size = self._filler
        filler = self._numpy.bytes(size * len(seqs))
        pack = HEADER.pack
        for k, (seq, intended) in enumerate(zip(seqs, intended_ns, strict=True)):
            sent = clock()
            yield (
                seq,
                sent,
                pack(MAGIC, HEADER_SCHEMA_VERSION, 0, producer_id, seq, intended, sent)
                + filler[k * size : (k + 1) * size],
            )


def decode_header(data: bytes) -> Header:
    """Parse the header of a received message; raise PayloadError for anything that is not ours."""
    if len(data) < HEADER_SIZE:
        raise PayloadError(f"message of {len(data)} B is shorter than the {HEADER_SIZE} B header")
    magic, version, hop, producer_id, seq, intended_ns, sent_ns = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise PayloadError(f"bad magic {magic!r}, expected {MAGIC!r}")
    if version != HEADER_SCHEMA_VERSION:
        raise PayloadError(f"header schema {version} is not supported (this reader knows {HEADER_SCHEMA_VERSION})")
    return Header(producer_id, seq, intended_ns, sent_ns, hop)


def decode_headers(payloads: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The headers of many messages at once, as a HEADER_DTYPE array, and which of them are ours (long
    enough, our magic, a schema this reader knows): the vectorised `decode_header`."""
    heads = b"".join([p[:HEADER_SIZE] for p in payloads])
    if len(heads) == HEADER_SIZE * len(payloads):
        long_enough = np.ones(len(payloads), dtype=bool)
    else:  # some message is shorter than a header: pad it, and refuse it
        long_enough = np.array([len(p) >= HEADER_SIZE for p in payloads], dtype=bool)
        heads = b"".join([p[:HEADER_SIZE].ljust(HEADER_SIZE, b"\0") for p in payloads])
    headers = np.frombuffer(heads, dtype=HEADER_DTYPE)
    ours = long_enough & (headers["magic"] == MAGIC) & (headers["schema"] == HEADER_SCHEMA_VERSION)
    return headers, ours


def decode_relay_stamps(payloads: Sequence[bytes]) -> np.ndarray:
    """(relay_received_ns, relay_sent_ns) of many relayed messages, shape (n, 2); -1 where a message is too
    short to carry them."""
    stamps = b"".join([p[HEADER_SIZE:RELAYED_MIN_SIZE] if len(p) >= RELAYED_MIN_SIZE else NO_RELAY for p in payloads])
    return np.frombuffer(stamps, dtype="<i8").reshape(-1, 2)


class RelayStamp(NamedTuple):
    received_ns: int
    sent_ns: int


def relay(data: bytes, received_ns: int) -> bytearray:
    """A relay's copy of a received message, ready to forward: hop + 1, its receive time written in.
    Everything the producer wrote (ids, intended and sent time, filler) travels on unchanged."""
    if len(data) < RELAYED_MIN_SIZE:
        raise PayloadError(f"message of {len(data)} B cannot carry a relay stamp (needs {RELAYED_MIN_SIZE} B)")
    buf = bytearray(data)
    buf[HOP_OFFSET] = min(255, buf[HOP_OFFSET] + 1)
    RELAY.pack_into(buf, HEADER_SIZE, received_ns, 0)
    return buf


def stamp_relay_sent(buf: bytearray, sent_ns: int) -> bytes:
    """The relay's send time, written right before it forwards (like `PayloadFactory.stamp`)."""
    SENT_FIELD.pack_into(buf, RELAY_SENT_OFFSET, sent_ns)
    return bytes(buf)


def decode_relay_stamp(data: bytes) -> RelayStamp:
    """The relay's times of a message whose header says hop >= 1."""
    if len(data) < RELAYED_MIN_SIZE:
        raise PayloadError(f"relayed message of {len(data)} B is shorter than {RELAYED_MIN_SIZE} B")
    return RelayStamp(*RELAY.unpack_from(data, HEADER_SIZE))
