"""The 32-byte header every sixnines message carries: its layout and sizes, with nothing heavy imported, so
settings models (parsed at DAG parse time) can check a message size against it. Packing, stamping and batch
decoding live in `load.payload`.

Layout (32 bytes): magic b"S9" | schema u8 | hop u8 | producer_id u32 | seq u64 | intended_ns u64 | sent_ns u64
A relayed message (hop >= 1) carries the relay's own times right after it: relay_received_ns u64 |
relay_sent_ns u64 (16 bytes; chain cells need >= 48-byte messages).
"""

from __future__ import annotations

import struct

MAGIC = b"S9"
# Version history: 1 — first layout (magic, schema, hop, producer_id, seq, intended_ns, sent_ns).
#                  2 — same header; a message with hop >= 1 carries the relay stamp after it.
HEADER_SCHEMA_VERSION = 2
HEADER = struct.Struct("<2sBBIQQQ")
HEADER_SIZE = HEADER.size  # 32
SENT_FIELD = struct.Struct("<Q")
SENT_OFFSET = HEADER_SIZE - SENT_FIELD.size
RELAY = struct.Struct("<QQ")  # relay_received_ns, relay_sent_ns
RELAY_SENT_OFFSET = HEADER_SIZE + 8
RELAYED_MIN_SIZE = HEADER_SIZE + RELAY.size  # 48
NO_RELAY = RELAY.pack(2**64 - 1, 2**64 - 1)  # -1, -1 as int64
HOP_OFFSET = 3
