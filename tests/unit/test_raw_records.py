"""The raw samples' Parquet files (`lake.records`): what a worker writes reads back identical, every value and
every null, and realistic rows take no more bytes per message than today's layout does (docs/lake.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench_tasks.core.schedule import PhasePlan
from bench_tasks.lake.records import (
    RECEIVED_SCHEMA,
    SCHEMA_VERSION,
    SENT_SCHEMA,
    read_schema_version,
    write_parquet,
    write_parquet_parts,
)
from bench_tasks.load import rawfiles

RATE_PER_S = 1000  # per producer, as the quick sweep's cells
PLAN = PhasePlan(t0_ns=28_191_000_000_000, warmup_ns=3 * 10**9, measure_ns=10 * 10**9, cooldown_ns=2 * 10**9)
# At most this many bytes per message (sent and received rows together) for an e2e cell's `cell_rows` (three
# producers, acknowledged, no chain): the layout gives 10.78 on them, where the order-0 entropy of each time
# column given the one it follows on its row is 8.90 (bench/raw_bytes.py's estimate; docs/lake.md).
BYTES_PER_MESSAGE = 11.0


def _micros(rng: np.random.Generator, median_us: float, n: int) -> np.ndarray:
    """Nanosecond delays around `median_us` with a heavy tail, as the quick sweep's lags and latencies."""
    return (rng.lognormal(np.log(median_us * 1e3), 0.35, n) + rng.pareto(2.0, n) * 20_000).astype(np.int64)


def cell_rows(
    messages: int, producers: int, seed: int, chain_share: float = 0.2
) -> tuple[list[pa.Table], pa.Table, pa.Table]:
    """A cell's sent tables (one per producer: refusals, acknowledgements with partition and offset), its
    consumer's receipts in arrival order (a few lost; `chain_share` of them of hop 2, with relay times) and its
    relay's."""
    rng = np.random.default_rng(seed)
    per = messages // producers
    sent_tables, receipts = [], []
    for producer in range(producers):
        seq = np.arange(per, dtype=np.int64)
        intended = PLAN.t0_ns + (producer + seq * producers) * (10**9 // (RATE_PER_S * producers))
        sent = intended + _micros(rng, 110, per)
        refused = rng.random(per) < 0.001
        sent[refused] = -1
        acked = np.where(refused, -1, sent + _micros(rng, 300, per))
        offset = np.where(refused, -1, np.cumsum(~refused) - 1)
        columns = {"seq": seq, "intended_ns": intended, "sent_ns": sent, "acked_ns": acked}
        columns |= {"partition": np.where(refused, -1, 0), "offset": offset}
        errors = {int(s): "refused: queue full" for s in np.flatnonzero(refused)}
        sent_tables.append(rawfiles.sent_table(columns, producer, PLAN, errors))
        got = ~refused & (rng.random(per) > 0.0005)
        received = sent[got] + _micros(rng, 150, int(got.sum()))
        receipts.append((np.full(got.sum(), producer), seq[got], intended[got], sent[got], received, offset[got]))
    merged = [np.concatenate(parts) for parts in zip(*receipts, strict=True)]
    order = np.argsort(merged[4], kind="stable")
    pid, seq, intended, sent, received, offset = (column[order] for column in merged)
    n = seq.size
    chain = rng.random(n) < chain_share  # receipts that went through a relay (hop 2)
    relay_received = np.where(chain, sent + _micros(rng, 60, n), -1)
    relay_sent = np.where(chain, relay_received + _micros(rng, 20, n), -1)
    columns = {"producer_id": pid, "seq": seq, "intended_ns": intended, "sent_ns": sent, "received_ns": received}
    columns |= {"partition": np.zeros(n, np.int64), "offset": offset, "hop": np.where(chain, 2, 0)}
    columns |= {"relay_received_ns": relay_received, "relay_sent_ns": relay_sent}
    consumer = rawfiles.received_table(columns, 0, PLAN)
    hop1 = {**columns, "hop": np.ones(n, np.int64), "received_ns": relay_received, "relay_sent_ns": relay_sent}
    relayed = rawfiles.received_table({k: v[chain] for k, v in hop1.items()}, 0, PLAN)
    return sent_tables, consumer, relayed


def written(folder: Path, sent: list[pa.Table], received: pa.Table, relayed: pa.Table) -> list[Path]:
    """The cell's files as the workers write them: a producer's whole, a receiver's in slices."""
    paths = []
    for producer, table in enumerate(sent):
        write_parquet(table, folder / f"sent-p{producer}.parquet")
        paths.append(folder / f"sent-p{producer}.parquet")
    for name, table in (("received-c0", received), ("relayed-r0", relayed)):
        slices = (table.slice(at, rawfiles.WRITE_ROWS) for at in range(0, table.num_rows, rawfiles.WRITE_ROWS))
        write_parquet_parts(RECEIVED_SCHEMA, slices, folder / f"{name}.parquet")
        paths.append(folder / f"{name}.parquet")
    return paths


def test_written_samples_read_back_identical_nulls_included(tmp_path: Path) -> None:
    sent, received, relayed = cell_rows(30_000, producers=3, seed=1)
    assert received["relay_sent_ns"].null_count > 0 and sent[0]["sent_ns"].null_count > 0
    assert sent[0]["error"].null_count < sent[0].num_rows
    paths = written(tmp_path, sent, received, relayed)
    for path, table in zip(paths, [*sent, received, relayed], strict=True):
        back = pq.read_table(path)
        assert back.schema.equals(SENT_SCHEMA if path.name.startswith("sent") else RECEIVED_SCHEMA, check_metadata=True)
        assert back.equals(table), path.name
        assert read_schema_version(path) == SCHEMA_VERSION


def test_realistic_rows_take_at_most_the_layouts_bytes_per_message(tmp_path: Path) -> None:
    sent, received, relayed = cell_rows(100_000, producers=3, seed=2, chain_share=0.0)
    paths = written(tmp_path, sent, received, relayed[:0])
    messages = sum(table.num_rows for table in sent)
    per_message = sum(path.stat().st_size for path in paths) / messages
    assert messages == 99_999 and received.num_rows > 0.99 * messages
    assert per_message <= BYTES_PER_MESSAGE, f"{per_message:.3f} bytes/message"
