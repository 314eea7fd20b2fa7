"""Sample files of worker programs (docs/workers.md, "Sample files") turned into the lake's raw Parquet files, and
the raw tables every worker's rows become (a Python worker's logs hand theirs to `sent_table`/`received_table`).

A sample file is one JSON line (`format`, `version`, `kind`: sent or received, `rows`, `columns`) followed by every
row as little-endian int64 values, -1 for null. A producer's error texts, when there are any, sit beside its file
as `<name>.errors` (`seq<TAB>text` lines). Conversion keeps every row and every value; the phase of each row is
cut here from its intended time, as a Python worker cuts its own (`core.schedule.PhasePlan`).

Why not Parquet or Arrow IPC from the worker itself: writing Parquet from Java needs parquet-hadoop and Hadoop's
client (tens of jars), Arrow IPC needs arrow-vector and Netty; a flat file costs the worker one sequential write
and the driving process one read (docs/workers.md gives the measured cost).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..core.schedule import PHASE_NAMES, PhasePlan
from ..lake import arrays
from ..lake.records import RECEIVED_SCHEMA, SENT_SCHEMA, write_parquet_parts
from .contract import ContractError

FORMAT, VERSION = "sixnines-raw", 1
SUFFIX = ".s9raw"
SENT_COLUMNS = ("seq", "intended_ns", "sent_ns", "acked_ns", "partition", "offset")
RECEIVED_COLUMNS = (
    "producer_id",
    "seq",
    "intended_ns",
    "sent_ns",
    "received_ns",
    "partition",
    "offset",
    "hop",
    "relay_received_ns",
    "relay_sent_ns",
)
COLUMNS = {"sent": SENT_COLUMNS, "received": RECEIVED_COLUMNS}
WRITE_ROWS = 1 << 16  # rows per slice of a Parquet file (as the Python receivers write theirs)


def read_raw(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    """A sample file's kind and its columns (int64, -1 = null), checked against what its kind must hold."""
    with path.open("rb") as f:
        head = f.readline()
        try:
            header: dict[str, Any] = json.loads(head)
        except json.JSONDecodeError as exc:
            raise ContractError(f"{path.name}: the first line is not the sample file's JSON header") from exc
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise ContractError(f"{path.name}: format {header.get('format')!r} version {header.get('version')!r}")
        kind, names, rows = header.get("kind"), list(header.get("columns", ())), int(header.get("rows", -1))
        if kind not in COLUMNS or sorted(names) != sorted(COLUMNS[kind]):
            raise ContractError(f"{path.name}: kind {kind!r} with columns {names}; expected {COLUMNS.get(kind)}")
        data = np.fromfile(f, dtype="<i8")
    if data.size != rows * len(names):
        raise ContractError(f"{path.name}: {data.size} values for {rows} rows of {len(names)} columns (cut short?)")
    table = data.reshape(rows, len(names))
    return kind, {name: np.ascontiguousarray(table[:, i]) for i, name in enumerate(names)}


def sent_table(c: dict[str, np.ndarray], producer_id: int, plan: PhasePlan, errors: dict[int, str]) -> pa.Table:
    """A producer's rows as the lake's sent table (schema `lake.records.SENT_SCHEMA`)."""
    n = c["seq"].size
    return pa.table(
        {
            "producer_id": arrays.filled(producer_id, n),
            "seq": arrays.ints(c["seq"]),
            "intended_ns": arrays.ints(c["intended_ns"]),
            "sent_ns": arrays.ints(c["sent_ns"], null_below_zero=True),
            "acked_ns": arrays.ints(c["acked_ns"], null_below_zero=True),
            "partition": arrays.ints(c["partition"], pa.int32(), null_below_zero=True),
            "offset": arrays.ints(c["offset"], null_below_zero=True),
            "phase": arrays.labels(plan.phases_of(c["intended_ns"]), PHASE_NAMES),
            "error": arrays.sparse_texts(errors, n),
        },
        schema=SENT_SCHEMA,
    )


def received_table(c: dict[str, np.ndarray], consumer_id: int, plan: PhasePlan) -> pa.Table:
    """A receiver's rows as the lake's received table (schema `lake.records.RECEIVED_SCHEMA`)."""
    n = c["seq"].size
    return pa.table(
        {
            "consumer_id": arrays.filled(consumer_id, n),
            "producer_id": arrays.ints(c["producer_id"], pa.int32()),
            "seq": arrays.ints(c["seq"]),
            "intended_ns": arrays.ints(c["intended_ns"]),
            "sent_ns": arrays.ints(c["sent_ns"]),
            "received_ns": arrays.ints(c["received_ns"]),
            "partition": arrays.ints(c["partition"], pa.int32(), null_below_zero=True),
            "offset": arrays.ints(c["offset"], null_below_zero=True),
            "leader": pa.nulls(n, pa.int32()),  # attributed from the leader timeline when the cell lands
            "hop": arrays.ints(c["hop"], pa.int8()),
            "relay_received_ns": arrays.ints(c["relay_received_ns"], null_below_zero=True),
            "relay_sent_ns": arrays.ints(c["relay_sent_ns"], null_below_zero=True),
            "phase": arrays.labels(plan.phases_of(c["intended_ns"]), PHASE_NAMES),
        },
        schema=RECEIVED_SCHEMA,
    )


def read_errors(path: Path) -> dict[int, str]:
    """`seq<TAB>text` lines beside a sent file; none when the file is absent."""
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        seq, _, text = line.partition("\t")
        out[int(seq)] = text
    return out


def convert(raw: Path, target: Path, worker_id: int, plan: PhasePlan) -> int:
    """Write `raw` (a worker's sample file) as the Parquet file `target`; the number of rows."""
    kind, columns = read_raw(raw)
    rows = columns["seq"].size
    if kind == "sent":
        errors = read_errors(raw.with_suffix(".errors"))
        parts = iter([sent_table(columns, worker_id, plan, errors)])
        schema = SENT_SCHEMA
    else:
        starts = range(0, rows, WRITE_ROWS) if rows else (0,)
        sliced = ({k: v[at : at + WRITE_ROWS] for k, v in columns.items()} for at in starts)
        parts = (received_table(c, worker_id, plan) for c in sliced)
        schema = RECEIVED_SCHEMA
    write_parquet_parts(schema, parts, target)
    return rows
