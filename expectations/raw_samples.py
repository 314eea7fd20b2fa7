"""Suites over raw samples: one row per scheduled message, and one row of aggregates per cell.

`raw_samples` (rows, spark_jobs.gate_frames.raw_samples_frame): keys present, every latency ≥ 0, and each
producer's sequence exactly 0..n−1 — unique (cell, repeat, producer, seq), seq ≥ 0 and seq < the producer's
row count (per repeat), which together leave no gap (GX's increasing-values expectation is wrong on Spark 1.24.1).

`raw_cells` (spark_jobs.gate_frames.raw_cells_frame): the generator kept its schedule (measure-phase
sends within `measure_tolerance` of rate × measure seconds; send-lag p99.9 under the cell's own
max_schedule_lag_ms), and loss is within what the cell allows (none where delivery is guaranteed:
Kafka acks=all, JetStream; elsewhere at most the cell's `workload.allowed_loss_ratio` of sent, plus the
suite's `allowed_loss_ratio` slack).
"""

from __future__ import annotations

import great_expectations as gx
import great_expectations.expectations as gxe

KEY_COLUMNS = ("run_id", "cell_id", "repeat", "producer_id", "seq", "intended_ns", "phase")
LATENCY_COLUMNS = ("lag_ns", "e2e_intended_ns", "e2e_sent_ns", "ack_intended_ns", "ack_sent_ns")


def build_raw_samples_suite(min_latency_ns: int = 0) -> gx.ExpectationSuite:
    """Row-level checks of every scheduled message. Latencies below `min_latency_ns` are clock errors."""
    expectations: list[gxe.Expectation] = []
    for column in KEY_COLUMNS:
        expectations.append(gxe.ExpectColumnValuesToNotBeNull(column=column))
    for column in LATENCY_COLUMNS:  # nulls (not received, not acked) are accounted for, not latencies
        expectations.append(gxe.ExpectColumnValuesToBeBetween(column=column, min_value=min_latency_ns))
    expectations.append(  # each repeat of a repeated cell numbers its messages from 0 again
        gxe.ExpectCompoundColumnsToBeUnique(column_list=["run_id", "cell_id", "repeat", "producer_id", "seq"])
    )
    expectations.append(gxe.ExpectColumnValuesToBeBetween(column="seq", min_value=0))
    expectations.append(gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="producer_rows", column_B="seq"))
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
