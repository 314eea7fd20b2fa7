"""Great Expectations suites for sixnines' data, as code (STYLE 12), and the gate that runs them.

Each `build_<dataset>_suite()` returns a fresh suite whose thresholds are its parameters; `gate.validate`
runs a suite against a Spark (or pandas) frame in an ephemeral context, so nothing is stored between runs.
The frames are prepared by spark_jobs.gate_frames: GX only compares columns with bounds, while quantiles
and per-cell aggregates are computed in Spark (GX 1.24.1's quantile expectation crashes serialising a
numpy bool, and its increasing-values expectation orders by a constant on Spark).
"""

from .faults import build_faults_suite
from .gate import SuiteOutcome, validate
from .percentile_tables import build_percentile_tables_suite
from .raw_samples import build_raw_cells_suite, build_raw_samples_suite

__all__ = [
    "SuiteOutcome",
    "build_faults_suite",
    "build_percentile_tables_suite",
    "build_raw_cells_suite",
    "build_raw_samples_suite",
    "validate",
]
