"""Small synthetic raw data written with the harness's real schemas and writers, with known answers.

`SynthCell` describes one cell; `write_run` lands it exactly where `sixnines run` would (raw Parquet per
producer/consumer, the run's cells.parquet), so the jobs read it through their real I/O edge.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench_tasks import CELLS_SCHEMA, RECEIVED_SCHEMA, SENT_SCHEMA, Lake, RunInfo, analyze, system_of
from bench_tasks.lake.records import write_parquet

T0 = 1_000_000_000_000
NS = 1_000_000_000


@dataclass
class SynthCell:
    """A uniform-rate cell. `latency_ns(seq)` gives each message's e2e latency; `lost` seqs never arrive."""

    cell_id: str
    system: str = "nats"
    mode: str = "core"
    measurement: str = "e2e"
    version: str = "2.15.1"
    rate_per_s: float = 1000.0
    warmup_s: float = 1.0
    measure_s: float = 2.0
    cooldown_s: float = 1.0
    producers: int = 1
    seed: int = 0
    lag_ns: int = 50_000
    lost: Sequence[int] = ()
    acks: str | None = None
    allowed_loss_ratio: float = 0.0
    extra_spec: dict[str, Any] = field(default_factory=dict)
    repeat: int = 1  # which run of a repeated cell this is (matrix `repeats:`); give each repeat its own seed
    repeats: int = 1
    faults: Sequence[dict[str, Any]] = ()  # the fault records landing would have written (core.faultcost)
    status: str = "ok"  # what the harness decided when the cell landed

    @property
    def measure_start_ns(self) -> int:
        return T0 + int(self.warmup_s * NS)

    @property
    def measure_end_ns(self) -> int:
        return self.measure_start_ns + int(self.measure_s * NS)

    def spec(self) -> dict[str, Any]:
        broker: dict[str, Any] = {"mode": self.mode} if self.system == "nats" else {"brokers": 1}
        client: dict[str, Any] = {"producer": {"acks": self.acks}} if self.acks else {}
        return {
            "system": self.system,
            "version": self.version,
            "measurement": self.measurement,
            "broker": broker,
            "client": client,
            "workload": {
                "rate_per_s": self.rate_per_s,
                "producers": self.producers,
                "warmup_s": self.warmup_s,
                "measure_s": self.measure_s,
                "cooldown_s": self.cooldown_s,
                "max_schedule_lag_ms": 100.0,
                "allowed_loss_ratio": self.allowed_loss_ratio,
            },
            **self.extra_spec,
        }


def phase_of(intended: np.ndarray, cell: SynthCell) -> np.ndarray:
    edges = np.array([cell.measure_start_ns, cell.measure_end_ns])
    return np.array(["warmup", "measure", "cooldown"], dtype=object)[np.searchsorted(edges, intended, side="right")]


def sent_table(cell: SynthCell, producer: int, acked: bool) -> pa.Table:
    """One producer's schedule (streams interleaved like the generator), all sent `lag_ns` late."""
    total_s = cell.warmup_s + cell.measure_s + cell.cooldown_s
    period = cell.producers * NS / cell.rate_per_s
    n = int(total_s * cell.rate_per_s / cell.producers)
    intended = T0 + np.round(producer * NS / cell.rate_per_s + np.arange(n) * period).astype(np.int64)
    sent = intended + cell.lag_ns
    ack = sent + latencies(cell, producer, n) // 2 if acked else None
    return pa.table(
        {
            "producer_id": pa.array(np.full(n, producer, np.int32)),
            "seq": pa.array(np.arange(n, dtype=np.int64)),
            "intended_ns": pa.array(intended),
            "sent_ns": pa.array(sent),
            "acked_ns": pa.array(ack) if ack is not None else pa.nulls(n, pa.int64()),
            "partition": pa.nulls(n, pa.int32()),
            "offset": pa.nulls(n, pa.int64()),
            "phase": pa.array(phase_of(intended, cell), pa.string()),
            "error": pa.nulls(n, pa.string()),
        },
        schema=SENT_SCHEMA,
    )


def latencies(cell: SynthCell, producer: int, n: int) -> np.ndarray:
    """Lognormal latencies around 300 µs with a heavy tail, reproducible per (seed, producer)."""
    rng = np.random.default_rng([cell.seed, producer])
    return (rng.lognormal(np.log(300_000), 0.6, n) + rng.pareto(2.5, n) * 50_000).astype(np.int64)


def received_table(cell: SynthCell, sent: pa.Table) -> pa.Table:
    """Receipts of every message but the `lost` seqs, `latencies` after intended; hop 0, no leader."""
    pid = sent["producer_id"].to_numpy()
    seq = sent["seq"].to_numpy()
    keep = ~np.isin(seq, np.asarray(cell.lost, dtype=np.int64))
    intended = sent["intended_ns"].to_numpy()[keep]
    received = intended + cell.lag_ns + latencies(cell, int(pid[0]), seq.size)[keep]
    return received_rows(cell, pid[keep], seq[keep], intended, intended + cell.lag_ns, received)


def received_rows(
    cell: SynthCell,
    pid: np.ndarray,
    seq: np.ndarray,
    intended: np.ndarray,
    sent: np.ndarray,
    received: np.ndarray,
    hop: np.ndarray | None = None,
    leader: np.ndarray | None = None,
) -> pa.Table:
    n = len(seq)
    return pa.table(
        {
            "consumer_id": pa.array(np.zeros(n, np.int32)),
            "producer_id": pa.array(np.asarray(pid, np.int32)),
            "seq": pa.array(np.asarray(seq, np.int64)),
            "intended_ns": pa.array(np.asarray(intended, np.int64)),
            "sent_ns": pa.array(np.asarray(sent, np.int64)),
            "received_ns": pa.array(np.asarray(received, np.int64)),
            "partition": pa.nulls(n, pa.int32()),
            "offset": pa.nulls(n, pa.int64()),
            "leader": pa.nulls(n, pa.int32()) if leader is None else pa.array(np.asarray(leader, np.int32)),
            "hop": pa.array(np.zeros(n, np.int8) if hop is None else np.asarray(hop, np.int8)),
            "relay_received_ns": pa.nulls(n, pa.int64()),
            "relay_sent_ns": pa.nulls(n, pa.int64()),
            "phase": pa.array(phase_of(np.asarray(intended), cell), pa.string()),
        },
        schema=RECEIVED_SCHEMA,
    )


def acked_metric(cell: SynthCell) -> str | None:
    if cell.measurement == "rtt":
        return "rtt"
    return None if cell.system == "nats" and cell.mode == "core" else "publish"


def cell_row(cell: SynthCell, run: RunInfo, sent: pa.Table, received: pa.Table) -> dict[str, Any]:
    """The row `sixnines run` would write, its counts from the generator's own analysis of the same data."""
    analysis = analyze(
        sent,
        received,
        cell.measurement,
        acked_metric(cell),
        (cell.measure_start_ns, cell.measure_end_ns),
        cell.rate_per_s,
    )
    row: dict[str, Any] = {name: None for name in CELLS_SCHEMA.names}
    row.update(
        schema_version=1,
        run_id=run.run_id,
        run_date=run.run_date,
        matrix="synthetic",
        cell_id=cell.cell_id,
        series_key=f"s-{cell.cell_id}",
        repeat=cell.repeat,
        repeats=cell.repeats,
        system=cell.system,
        version=cell.version,
        measurement=cell.measurement,
        label=f"{cell.system}/{cell.mode} {cell.version} {cell.measurement}",
        status=cell.status,
        t0_ns=T0,
        measure_start_ns=cell.measure_start_ns,
        measure_end_ns=cell.measure_end_ns,
        end_ns=cell.measure_end_ns + int(cell.cooldown_s * NS),
        acked_metric=system_of(cell.spec()).acked_metric(cell.spec()),  # recorded as landing records them
        delivery_guaranteed=system_of(cell.spec()).delivery_guaranteed(cell.spec()),
        durable_acks=system_of(cell.spec()).promises_no_acknowledged_loss(cell.spec()),
        faults_json=json.dumps(list(cell.faults)),
        spec_json=json.dumps(cell.spec()),
        context_json="{}",
        results_json=json.dumps(analysis.to_dict()),
        **{
            k: getattr(analysis.accounting, k)
            for k in ("scheduled", "sent", "acknowledged", "received", "lost", "duplicated")
        },
    )
    return row


def acked(cell: SynthCell) -> bool:
    return acked_metric(cell) is not None


def write_cell(
    lake: Path, run: RunInfo, cell: SynthCell, received: pa.Table | None = None, sent: list[pa.Table] | None = None
) -> None:
    """Land one cell: its sent files, its received file (e2e cells), its row in cells.parquet."""
    folder = Lake(lake).cell_dir(run, cell.cell_id, cell.repeat if cell.repeats > 1 else None)
    parts = sent if sent is not None else [sent_table(cell, p, acked(cell)) for p in range(cell.producers)]
    for producer, table in enumerate(parts):
        write_parquet(table, folder / f"sent-p{producer}.parquet")
    got = RECEIVED_SCHEMA.empty_table()
    if cell.measurement == "e2e":
        got = received if received is not None else pa.concat_tables([received_table(cell, t) for t in parts])
        write_parquet(got, folder / "received-c0.parquet")
    Lake(lake).upsert_cell_row(run, cell_row(cell, run, pa.concat_tables(parts), got))


def write_run(lake: Path, cells: Sequence[SynthCell], run_id: str = "synthetic-run") -> RunInfo:
    run = RunInfo(run_id=run_id, run_date="2026-01-02")
    for cell in cells:
        write_cell(lake, run, cell)
    return run
