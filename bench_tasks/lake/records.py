"""Parquet schemas of the raw samples and their atomic writer.

Version history of SCHEMA_VERSION (stored in every file's metadata as `sixnines.schema_version`):
  1 — sent: producer_id, seq, intended_ns, sent_ns, acked_ns, partition, offset, phase, error;
      received: consumer_id, producer_id, seq, intended_ns, sent_ns, received_ns, partition, offset,
      leader, hop, phase.
  2 — received gains relay_received_ns, relay_sent_ns (two-hop service chain: when the relay got the
      message and when it forwarded it; null for messages that were not relayed). Relays write their own
      rows (hop 1) to relayed-r*.parquet; final consumers of a chain write hop 2 rows.
Time columns are int64 nanoseconds of CLOCK_MONOTONIC, shared by every process on the host.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .storage import S3Path, read_parquet_schema, write_parquet_object

SCHEMA_VERSION = 2
_META = {b"sixnines.schema_version": str(SCHEMA_VERSION).encode()}

SENT_SCHEMA = pa.schema(
    [
        ("producer_id", pa.int32()),
        ("seq", pa.int64()),
        ("intended_ns", pa.int64()),
        ("sent_ns", pa.int64()),  # null: the client refused the message
        ("acked_ns", pa.int64()),  # null: no ack / reply (or none expected)
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("phase", pa.string()),
        ("error", pa.string()),
    ],
    metadata=_META,
)

RECEIVED_SCHEMA = pa.schema(
    [
        ("consumer_id", pa.int32()),
        ("producer_id", pa.int32()),
        ("seq", pa.int64()),
        ("intended_ns", pa.int64()),
        ("sent_ns", pa.int64()),
        ("received_ns", pa.int64()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("leader", pa.int32()),  # the partition's leader when the message arrived (Kafka; NATS cluster: stream leader)
        # 0: not a service chain; in a two-hop chain 1 = a relay's receipt (relayed-r*), 2 = the final consumer's
        ("hop", pa.int8()),
        ("relay_received_ns", pa.int64()),
        ("relay_sent_ns", pa.int64()),
        ("phase", pa.string()),
    ],
    metadata=_META,
)

# Monotone integer columns compress best with delta encoding; low-cardinality strings with dictionaries.
_DELTA_COLUMNS = (
    "seq",
    "intended_ns",
    "sent_ns",
    "acked_ns",
    "received_ns",
    "offset",
    "relay_received_ns",
    "relay_sent_ns",
)
_DICT_COLUMNS = ["phase", "error"]


def write_parquet(table: pa.Table, path: Path | S3Path) -> None:
    """Write to a temporary name in the same folder, then rename: readers never see half a file. On S3 the
    object is one upload, visible only when complete."""
    delta = {c: "DELTA_BINARY_PACKED" for c in _DELTA_COLUMNS if c in table.column_names}
    options = {
        "compression": "zstd",
        "use_dictionary": [c for c in _DICT_COLUMNS if c in table.column_names],
        "column_encoding": delta,
    }
    if isinstance(path, S3Path):
        write_parquet_object(table, path, **options)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        pq.write_table(table, tmp, **options)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_schema_version(path: Path | S3Path) -> int:
    meta = read_parquet_schema(path).metadata or {}
    return int(meta.get(b"sixnines.schema_version", b"0"))
