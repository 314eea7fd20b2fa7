"""The frames the Great Expectations gate validates, built on the driver from the analysis and the tables.

They are small — one row per producer, per cell, per table row — so the gate hands them to GX as pandas
frames. GX then only compares columns with bounds (expectations/): per-producer and per-cell aggregates and
the schedule-lag quantile are computed here, exactly (spark_jobs.ledger, spark_jobs.analysis), not by GX.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench_tasks import PERCENTILES
from spark_jobs.analysis import Analysis
from spark_jobs.exact import percentile_column
from spark_jobs.levels import LAG_PERCENTILE, REPEAT
from spark_jobs.metrics import LAG
from spark_jobs.percentiles import ACCOUNTING_COLUMNS
from spark_jobs.samples import CELL_KEYS, MERGED_KEYS


def raw_producers_frame(result: Analysis) -> pd.DataFrame:
    """One row per producer of every cell (every phase): its rows, seq range, duplicated seqs, rows missing a
    key, and its lowest latency of each kind (spark_jobs.ledger.producer_checks)."""
    return result.ledger.producers


def _lag_gate(summary: pd.DataFrame) -> pd.DataFrame:
    """Per unit, the send lag the gate holds against the cell's limit: its p99.9, or the max where too few
    samples support that (as the harness's own gate does)."""
    lag = summary[(summary["level"] == REPEAT) & (summary["metric"] == LAG)]
    gate_ns = lag[percentile_column(LAG_PERCENTILE)].fillna(lag["max_ns"])
    return pd.DataFrame({"unit": lag["g"], "lag_gate_ns": gate_ns})


def raw_cells_frame(result: Analysis) -> pd.DataFrame:
    """One row per cell: measure-phase sends over rate × measure seconds, send-lag p99.9 over the cell's limit
    (null for rtt), loss.

    Only the cells the harness passed are judged. A cell it failed (a saturated harness, a broker that fell
    behind, a generator an Airflow phase watcher stopped, a loss its system does not allow) already carries
    that verdict and its reason in its row, and is published as failed; judging it again would quarantine
    the run's other cells with it."""
    accounting = result.ledger.accounting.drop(columns=list(CELL_KEYS))
    rows = result.facts.merge(accounting, on="unit", how="left").merge(_lag_gate(result.summary), on="unit", how="left")
    rows = rows[rows["status"] == "ok"]
    sent, lost = rows["sent"], rows["lost"]
    loss_ratio = (lost / sent).where(sent > 0, 0.0)
    limit_ns = rows["max_schedule_lag_ms"] * 1e6
    return pd.DataFrame(
        {
            **{k: rows[k] for k in CELL_KEYS},
            "measurement": rows["measurement"],
            "measure_sent": sent,
            "measure_ratio": sent / (rows["rate_per_s"] * rows["measure_s"]),
            "lag_gate_ns": rows["lag_gate_ns"],
            "lag_over_limit": (rows["lag_gate_ns"] / limit_ns).where(rows["measurement"] != "rtt"),
            "lost": lost,
            "lost_guaranteed": lost.where(rows["delivery_guaranteed"].astype(bool), 0),
            "loss_ratio": loss_ratio,
            # how far the loss goes past what the cell's matrix allows (workload.allowed_loss_ratio); <= 0 passes
            "loss_over_allowance": loss_ratio - rows["allowed_loss_ratio"],
        }
    )


def faults_frame(faults: pd.DataFrame) -> pd.DataFrame:
    """The faults table with `acknowledged_but_lost_promised`: a fault's acknowledged_but_lost where its cell's
    settings promise none (`durable_acks`), else 0 (a fault landed without its cost counts none)."""
    lost = faults["acknowledged_but_lost"]
    promised = np.where(faults["durable_acks"].astype(bool), lost.fillna(0), 0)
    columns = [*CELL_KEYS, "fault", "kind", "node", "durable_acks", "acknowledged_but_lost"]
    return faults[columns].assign(acknowledged_but_lost_promised=promised)


def percentile_tables_frame(percentiles: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """The percentile table with `<p>_or_max` chain columns and the raw counts from cells.parquet (summed over a
    repeated cell's repeats, as its merged rows are)."""
    counts = [c for c in ACCOUNTING_COLUMNS if c in cells.columns]
    raw = cells.groupby(list(MERGED_KEYS))[counts].sum(min_count=1).add_prefix("raw_").reset_index()
    chain = {
        f"{percentile_column(p)}_or_max": percentiles[percentile_column(p)].fillna(percentiles["max_ns"])
        for p in PERCENTILES
    }
    return percentiles.merge(raw, on=list(MERGED_KEYS), how="left").assign(**chain)
