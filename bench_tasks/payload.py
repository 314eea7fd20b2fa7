"""The message header every sixnines message carries, followed by random filler up to the message size.

The filler is random so compression cannot shrink it (seed 000); it is a rotating window over one random
pool, so producing it costs a slice, not a random-number call per byte. The header is fixed-size, little
endian, and versioned so a reader can refuse what it does not understand.

Layout (32 bytes): magic b"S9" | schema u8 | hop u8 | producer_id u32 | seq u64 | intended_ns u64 | sent_ns u64
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from .errors import PayloadError

MAGIC = b"S9"
# Version history: 1 — first layout (magic, schema, hop, producer_id, seq, intended_ns, sent_ns).
HEADER_SCHEMA_VERSION = 1
_HEADER = struct.Struct("<2sBBIQQQ")
HEADER_SIZE = _HEADER.size  # 32
_POOL_WINDOWS = 4096


class Header(NamedTuple):
    producer_id: int
    seq: int
    intended_ns: int
    sent_ns: int
    hop: int


class PayloadFactory:
    """Builds messages of exactly `size_bytes`: header, then incompressible filler."""

    def __init__(self, size_bytes: int):
        if size_bytes < HEADER_SIZE:
            raise PayloadError(f"message size {size_bytes} B is below the {HEADER_SIZE} B header")
        self.size_bytes = size_bytes
        self._pool = os.urandom(size_bytes + _POOL_WINDOWS)

    def make(self, producer_id: int, seq: int, intended_ns: int, sent_ns: int, hop: int = 0) -> bytes:
        start = (seq * 61) % _POOL_WINDOWS
        buf = bytearray(self._pool[start : start + self.size_bytes])
        _HEADER.pack_into(buf, 0, MAGIC, HEADER_SCHEMA_VERSION, hop, producer_id, seq, intended_ns, sent_ns)
        return bytes(buf)


def decode_header(data: bytes) -> Header:
    """Parse the header of a received message; raise PayloadError for anything that is not ours."""
    if len(data) < HEADER_SIZE:
        raise PayloadError(f"message of {len(data)} B is shorter than the {HEADER_SIZE} B header")
    magic, version, hop, producer_id, seq, intended_ns, sent_ns = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise PayloadError(f"bad magic {magic!r}, expected {MAGIC!r}")
    if version != HEADER_SCHEMA_VERSION:
        raise PayloadError(f"header schema {version} is not supported (this reader knows {HEADER_SCHEMA_VERSION})")
    return Header(producer_id, seq, intended_ns, sent_ns, hop)
