"""How many bytes per message do a cell's raw samples take in the lake, column by column? (issue 45, item 4)

Two sources of rows, each measured the same way:
- `--run-dir DIR`: a landed run's raw folder (`lake/raw/run_date=D/run_id=R`, a quick sweep's, say): every
  `sent-p*`, `received-c*` and `relayed-r*` file under it, as it lies on disk and as written again;
- `--synthetic N`: the raw files `bench/spark_percentiles.py` lands for N messages over `--cells` cells (its
  own cell shapes and seed, built one cell at a time and written in memory).

For each source it writes every table again with the lake's own writer (`bench_tasks.write_parquet`), with
a few other physical layouts every reader would see unchanged (other encodings, zstd levels, statistics off)
and, as a schema change would store them, with receipts lacking the intended and sent times they repeat. It
reports bytes per message (sent and received rows together, divided by the sent rows: one per scheduled
message) per column and in total, and the seconds each layout took to write per million rows, side by side.

It also reports how far below today's figure a lossless layout could go at all, the columns' information
content as estimated by xz (lzma, preset 6) on their int64 values — `xz alone`, each time column as the
differences of consecutive values (what a column-by-column encoding can exploit); `given_row`, each time column
less the time it follows on its own row (sent − intended, acked − sent, received − sent, relay hops), which
only another schema could store — and the order-0 entropy of the latter (`entropy given_row`: of its lowest 6
bits and of the rest, added). Received rows' `intended_ns`/`sent_ns` repeat the producer's (the message
header carries them): `copies_of_sent` counts the receipts whose pair equals the sent row's.

    .venv/bin/python bench/raw_bytes.py --run-dir LAKE/raw/run_date=D/run_id=R [--synthetic 10000000 --cells 8]

Results go to bench/results/raw_bytes.json with the arguments and the host's load before and after.
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's writer, not the venv's
from bench.spark_percentiles import synth_cell, with_duplicates
from bench_tasks import write_parquet
from tests.spark.synth import received_table, sent_table

RESULTS = Path(__file__).parent / "results"
KINDS = {"sent": "sent-p*.parquet", "received": "received-c*.parquet", "relayed": "relayed-r*.parquet"}
TIMES = ("sent_ns", "acked_ns", "received_ns", "relay_received_ns", "relay_sent_ns")
# What each time column follows on its own row (the `given_row` estimate).
FOLLOWS = {
    "sent_ns": "intended_ns",
    "acked_ns": "sent_ns",
    "received_ns": "sent_ns",
    "relay_received_ns": "sent_ns",
    "relay_sent_ns": "relay_received_ns",
}
FLOOR_ROWS = 1 << 20  # rows of each table the xz estimate reads (it scales by the table's rows)
ENTROPY_LOW_BITS = 6  # bits of a nanosecond residual the entropy estimate takes as uniform
INFORMATION = ("xz alone", "xz given_row", "entropy given_row")
COPIED = ("intended_ns", "sent_ns")  # a receipt's copies of its sent row's times
WITHOUT_COPIES = "receipts without copied times (another schema)"
_DELTA = ("seq", "intended_ns", *TIMES, "offset")


def _alternative(time_encoding: str, level: int | None = None, statistics: bool = True) -> Callable:
    """pyarrow write options of a layout other than the lake's (the same logical table)."""

    def options(names: list[str]) -> dict[str, Any]:
        encodings = {c: "DELTA_BINARY_PACKED" for c in _DELTA if c in names}
        encodings |= {c: time_encoding for c in TIMES if c in names}
        chosen = {"compression": "zstd", "column_encoding": encodings, "write_statistics": statistics}
        chosen["use_dictionary"] = [c for c in ("phase", "error") if c in names]
        return chosen | ({"compression_level": level} if level else {})

    return options


ALTERNATIVES = {
    "zstd 9": _alternative("DELTA_BINARY_PACKED", 9),
    "zstd 19": _alternative("DELTA_BINARY_PACKED", 19),
    "no statistics": _alternative("DELTA_BINARY_PACKED", statistics=False),
    "byte stream split, zstd 3": _alternative("BYTE_STREAM_SPLIT", 3),
    "byte stream split, zstd 15": _alternative("BYTE_STREAM_SPLIT", 15),
}


def run_tables(folder: Path) -> Iterator[tuple[str, pa.Table, int]]:
    """Each raw file of a landed run: its kind, its rows and its size on disk."""
    for kind, pattern in KINDS.items():
        for path in sorted(folder.rglob(pattern)):
            yield kind, pq.read_table(path), path.stat().st_size


def synthetic_tables(messages: int, cells: int) -> Iterator[tuple[str, pa.Table, int]]:
    """bench/spark_percentiles.py's raw tables for `messages` over `cells`, one cell at a time."""
    seed = messages % 9973  # as spark_percentiles lands them
    for index in range(cells):
        cell = synth_cell(index, messages // cells + (1 if index < messages % cells else 0), seed)
        sent = sent_table(cell, 0, acked=cell.mode == "jetstream")
        yield "sent", sent, 0
        yield "received", with_duplicates(received_table(cell, sent), cell.seed), 0


def column_bytes(data: bytes) -> dict[str, int]:
    """Compressed bytes of each column chunk, summed over row groups (what the column costs on disk)."""
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    sizes: Counter[str] = Counter()
    for group in range(meta.num_row_groups):
        for column in range(meta.num_columns):
            chunk = meta.row_group(group).column(column)
            sizes[chunk.path_in_schema] += chunk.total_compressed_size
    return dict(sizes)


def lake_writer(table: pa.Table, scratch: Path) -> bytes:
    """The table as the lake's writer writes it (through a file: `write_parquet` renames into place)."""
    path = scratch / "t.parquet"
    write_parquet(table, path)
    return path.read_bytes()


def without_copies(table: pa.Table, scratch: Path) -> bytes:
    """What another schema would weigh: receipts without the intended and sent times their header repeats
    (joined back from the sent rows), through the lake's writer."""
    receipts = "received_ns" in table.column_names
    return lake_writer(table.drop_columns(list(COPIED)) if receipts else table, scratch)


def other_writer(options: Callable) -> Callable[[pa.Table, Path], bytes]:
    def write(table: pa.Table, scratch: Path) -> bytes:
        sink = io.BytesIO()
        pq.write_table(table, sink, **options(table.column_names))
        return sink.getvalue()

    return write


def xz_bytes(values: pa.ChunkedArray | pa.Array) -> float:
    """xz's size of the non-null int64 values, scaled from at most FLOOR_ROWS of them to all."""
    kept = values.drop_null()
    if len(kept) == 0:
        return 0.0
    head = kept.slice(0, FLOOR_ROWS).to_numpy().astype("<i8")
    return len(lzma.compress(head.tobytes(), preset=6)) * len(kept) / head.size


def entropy_bytes(values: pa.ChunkedArray) -> float:
    """Order-0 entropy of the non-null values, in bytes over all of them: that of the values without their low
    ENTROPY_LOW_BITS bits plus that of those bits (a few thousand samples cannot count every nanosecond)."""
    kept = values.drop_null().to_numpy()
    if kept.size == 0:
        return 0.0
    low = (1 << ENTROPY_LOW_BITS) - 1
    return (_entropy_bits(kept >> ENTROPY_LOW_BITS) + _entropy_bits(kept & low)) / 8 * kept.size


def _entropy_bits(values: np.ndarray) -> float:
    _, counts = np.unique(values, return_counts=True)
    p = counts / values.size
    return float(-(p * np.log2(p)).sum()) + 0.0  # + 0.0: one value's -0.0 reads as 0.0


def floor_bytes(table: pa.Table) -> dict[str, dict[str, float]]:
    """Each time column's xz size alone (consecutive differences) and given the time it follows on its row,
    and the order-0 entropy of the latter."""
    out: dict[str, dict[str, float]] = {}
    for name in TIMES:
        if name not in table.column_names or table[name].null_count == table.num_rows:
            continue
        values = table[name].drop_null().to_numpy()
        given = pc.subtract(table[name], table[FOLLOWS[name]])
        alone = xz_bytes(pa.array(np.diff(values, prepend=values[:1])))
        out[name] = {"xz alone": alone, "xz given_row": xz_bytes(given), "entropy given_row": entropy_bytes(given)}
    return out


def copies_of_sent(sent: list[pa.Table], received: list[pa.Table]) -> dict[str, int]:
    """How many receipts carry exactly their sent row's intended_ns and sent_ns."""
    keys = ["producer_id", "seq", "intended_ns", "sent_ns"]
    if not sent or not received:
        return {"receipts": sum(t.num_rows for t in received), "equal": 0}
    produced = pa.concat_tables([t.select(keys) for t in sent])
    got = pa.concat_tables([t.select(keys) for t in received])
    matched = got.join(produced, keys=keys, join_type="inner")
    return {"receipts": got.num_rows, "equal": matched.num_rows}


def measure(tables: Iterator[tuple[str, pa.Table, int]], keep_for_copies: bool) -> dict[str, Any]:
    """Bytes per column and per layout, write seconds, xz estimates, over every table of a source."""
    writers = {"lake writer": lake_writer} | {name: other_writer(o) for name, o in ALTERNATIVES.items()}
    writers[WITHOUT_COPIES] = without_copies
    sizes: dict[str, Counter[str]] = {name: Counter() for name in writers}
    seconds: Counter[str] = Counter()
    floor: Counter[str] = Counter()
    rows: Counter[str] = Counter()
    on_disk = 0
    kept: dict[str, list[pa.Table]] = {"sent": [], "received": []}
    with tempfile.TemporaryDirectory() as scratch:
        for kind, table, disk in tables:
            rows[kind] += table.num_rows
            on_disk += disk
            for name, write in writers.items():
                started = time.perf_counter()
                data = write(table, Path(scratch))
                seconds[name] += time.perf_counter() - started
                sizes[name].update({f"{kind}.{c}": n for c, n in column_bytes(data).items()})
                sizes[name][f"{kind} file"] += len(data)
            for column, estimate in floor_bytes(table).items():
                floor.update({f"{kind}.{column} {how}": n for how, n in estimate.items()})
            if keep_for_copies and kind in kept:
                kept[kind].append(table)
    messages = rows["sent"]
    written = sum(rows.values())

    def per_message(counts: Counter[str]) -> dict[str, float]:
        return {k: round(v / messages, 3) for k, v in sorted(counts.items())}

    layouts = {}
    for name, counts in sizes.items():
        total = sum(v for k, v in counts.items() if k.endswith(" file"))
        layouts[name] = {
            "bytes_per_message": round(total / messages, 3),
            "columns": per_message(counts),
            "write_seconds_per_million_rows": round(seconds[name] / written * 1e6, 3),
        }
    totals = {f"{how} total": sum(v for k, v in floor.items() if k.endswith(how)) for how in INFORMATION}
    return {
        "messages": messages,
        "rows": dict(rows),
        "on_disk_bytes_per_message": round(on_disk / messages, 3) if on_disk else None,
        "layouts": layouts,
        "time_columns_information": per_message(floor) | per_message(Counter(totals)),
        "copies_of_sent": copies_of_sent(kept["sent"], kept["received"]) if keep_for_copies else None,
    }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def report(name: str, result: dict[str, Any]) -> None:
    print(f"{name}: {result['messages']:,} messages, rows {result['rows']}")
    if result["on_disk_bytes_per_message"] is not None:
        print(f"  on disk: {result['on_disk_bytes_per_message']} bytes/message")
    for layout, figures in result["layouts"].items():
        big = {k: v for k, v in figures["columns"].items() if v >= 0.05 and " file" not in k}
        s = figures["write_seconds_per_million_rows"]
        print(f"  {layout:48s} {figures['bytes_per_message']:6.3f} bytes/message, {s:.3f} s/M rows  {big}")
    info = result["time_columns_information"]
    print("  time columns' information, bytes/message: " + ", ".join(f"{h} {info[h + ' total']}" for h in INFORMATION))
    if result["copies_of_sent"]:
        print(f"  receipts equal to their sent row (intended_ns, sent_ns): {result['copies_of_sent']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, action="append", default=[], help="a landed run's raw folder")
    parser.add_argument("--synthetic", type=int, action="append", default=[], help="spark_percentiles' N messages")
    parser.add_argument("--cells", type=int, default=8, help="cells of a --synthetic source")
    args = parser.parse_args()
    if not args.run_dir and not args.synthetic:
        parser.error("give --run-dir or --synthetic")
    document: dict[str, Any] = {"benchmark": "raw_bytes", "arguments": sys.argv[1:], "load_before": _load()}
    sources: dict[str, Any] = {}
    for folder in args.run_dir:
        sources[f"run {folder.name}"] = measure(run_tables(folder), keep_for_copies=True)
        report(f"run {folder.name}", sources[f"run {folder.name}"])
    for messages in args.synthetic:
        name = f"spark_percentiles {messages} messages over {args.cells} cells"
        sources[name] = measure(synthetic_tables(messages, args.cells), keep_for_copies=False)
        report(name, sources[name])
    document |= {"sources": sources, "load_after": _load(), "pyarrow": pa.__version__}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "raw_bytes.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"load {document['load_before']} -> {document['load_after']}; wrote {RESULTS / 'raw_bytes.json'}")


if __name__ == "__main__":
    main()
