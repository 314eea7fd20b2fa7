"""What a cell task knows of each of its units (spark_jobs.samples.Units' facts, plain values to pickle)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .read import Col


@dataclass(frozen=True)
class UnitWork:
    """One unit (a run × cell × repeat) of a cell task: its facts and raw files."""

    unit: int
    cell_ix: int
    t0_ns: int
    measure_start_ns: int
    measure_end_ns: int
    acked_code: int | None  # samples.PUBLISH or RTT where the cell measures its acknowledgements
    received_measured: bool  # whether its consumers' receipts are samples (measurement e2e or chain)
    sent_files: tuple[str, ...]
    received_files: tuple[str, ...]

    def in_measure(self, intended: Col) -> np.ndarray:
        """The harness's phase rule (samples.Units.in_measure): intended in [measure start, measure end)."""
        values = intended.values
        return intended.valid & (values >= self.measure_start_ns) & (values < self.measure_end_ns)
