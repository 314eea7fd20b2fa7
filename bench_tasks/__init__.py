"""sixnines' measurement library.

What DAGs, Spark jobs and tests may import is named here; the rest is private (STYLE 7).
"""

from .cell.lifecycle import (
    CellWork,
    land_step,
    landed_summary,
    prepare_cell,
    provision_step,
    release_clusters,
    start_generator,
    teardown_step,
)
from .cell.runner import CellReport, run_cell, run_matrix
from .cell.watch import watch_phase
from .cell_runner import Fault
from .core.analysis import Accounting, CellAnalysis, analyze
from .core.percentiles import PERCENTILES, LatencySummary, is_supported, required_samples, summarize
from .errors import BrokerError, CellError, MatrixError, PayloadError, SixninesError
from .lake.layout import CELLS_SCHEMA, Lake, RunInfo
from .lake.records import RECEIVED_SCHEMA, SCHEMA_VERSION, SENT_SCHEMA, read_schema_version
from .spec.matrix import Cell, Matrix, load_matrix, parse_matrix

__all__ = [
    "CELLS_SCHEMA",
    "PERCENTILES",
    "RECEIVED_SCHEMA",
    "SCHEMA_VERSION",
    "SENT_SCHEMA",
    "Accounting",
    "BrokerError",
    "Cell",
    "CellAnalysis",
    "CellError",
    "CellReport",
    "CellWork",
    "Fault",
    "Lake",
    "LatencySummary",
    "Matrix",
    "MatrixError",
    "PayloadError",
    "RunInfo",
    "SixninesError",
    "analyze",
    "is_supported",
    "land_step",
    "landed_summary",
    "load_matrix",
    "parse_matrix",
    "prepare_cell",
    "provision_step",
    "read_schema_version",
    "release_clusters",
    "required_samples",
    "run_cell",
    "run_matrix",
    "start_generator",
    "summarize",
    "teardown_step",
    "watch_phase",
]
