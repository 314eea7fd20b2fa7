"""Suites over raw samples: one row of aggregates per producer, and one per cell.

`raw_samples` (one row per producer of a cell repeat, spark_jobs.gate_frames.raw_producers_frame, counted
without joining messages by spark_jobs.ledger): keys present (no row lacks its seq, intended time or phase),
every latency ≥ 0 (each column is the producer's lowest), and the producer's sequence exactly 0..n−1 — no seq
twice, the lowest ≥ 0 and the highest < the producer's row count (per repeat), which together leave no gap.

`raw_cells` (spark_jobs.gate_frames.raw_cells_frame): the generator kept its schedule (measure-phase
sends within `measure_tolerance` of rate × measure seconds; send-lag p99.9 under the cell's own
max_schedule_lag_ms), and loss is within what the cell allows (none where delivery is guaranteed:
Kafka acks=all, JetStream; elsewhere at most the cell's `workload.allowed_loss_ratio` of sent, plus the
suite's `allowed_loss_ratio` slack).
"""

from __future__ import annotations

import great_expectations as gx
import great_expectations.expectations as gxe

KEY_COLUMNS = ("run_id", "cell_id", "repeat", "producer_id")
MISSING_COLUMNS = ("null_seq", "null_intended", "null_phase")  # rows lacking a key, per producer
LATENCY_COLUMNS = ("min_lag_ns", "min_e2e_intended_ns", "min_e2e_sent_ns", "min_ack_intended_ns", "min_ack_sent_ns")


def build_raw_samples_suite(min_latency_ns: int = 0) -> gx.ExpectationSuite:
    """Checks of every producer's rows. Latencies below `min_latency_ns` are clock errors."""
    expectations: list[gxe.Expectation] = []
    for column in KEY_COLUMNS:
        expectations.append(gxe.ExpectColumnValuesToNotBeNull(column=column))
    for column in MISSING_COLUMNS:
        expectations.append(gxe.ExpectColumnValuesToBeBetween(column=column, min_value=0, max_value=0))
    for column in LATENCY_COLUMNS:  # nulls (nothing received, nothing acked) are accounted for, not latencies
        expectations.append(gxe.ExpectColumnValuesToBeBetween(column=column, min_value=min_latency_ns))
    # each repeat of a repeated cell numbers its messages from 0 again
    expectations.append(gxe.ExpectColumnValuesToBeBetween(column="duplicate_seqs", min_value=0, max_value=0))
    expectations.append(gxe.ExpectColumnValuesToBeBetween(column="min_seq", min_value=0))
    expectations.append(gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="producer_rows", column_B="max_seq"))
    return gx.ExpectationSuite(name="raw_samples", expectations=expectations)


def build_raw_cells_suite(measure_tolerance: float = 0.01, allowed_loss_ratio: float = 0.0) -> gx.ExpectationSuite:
    """Per-cell checks of the generator's schedule and of loss. Thresholds are this function's parameters;
    the lag limit is each cell's own `max_schedule_lag_ms` (the frame divides by it; rtt cells are exempt
    because a synchronous connection's lag is the system's, as the harness's own gate decides)."""
    expectations: list[gxe.Expectation] = []
    expectations.append(gxe.ExpectColumnValuesToNotBeNull(column="measure_ratio"))
    expectations.append(
        gxe.ExpectColumnValuesToBeBetween(
            column="measure_ratio", min_value=1 - measure_tolerance, max_value=1 + measure_tolerance
        )
    )
    expectations.append(gxe.ExpectColumnValuesToBeBetween(column="lag_over_limit", max_value=1.0))
    expectations.append(gxe.ExpectColumnValuesToBeBetween(column="lost_guaranteed", min_value=0, max_value=0))
    expectations.append(  # each cell's own allowance (its matrix's workload.allowed_loss_ratio), plus this slack
        gxe.ExpectColumnValuesToBeBetween(column="loss_over_allowance", max_value=allowed_loss_ratio)
    )
    return gx.ExpectationSuite(name="raw_cells", expectations=expectations)
