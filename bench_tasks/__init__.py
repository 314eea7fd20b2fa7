"""sixnines' measurement library.

What DAGs, Spark jobs and tests may import is named here; the rest is private (STYLE 7).
"""

from .analysis import Accounting, CellAnalysis, analyze
from .cell_runner import Fault
from .errors import BrokerError, CellError, MatrixError, PayloadError, SixninesError
from .lake import CELLS_SCHEMA, Lake, RunInfo
from .matrix import Cell, Matrix, load_matrix, parse_matrix
from .percentiles import PERCENTILES, LatencySummary, is_supported, required_samples, summarize
from .records import RECEIVED_SCHEMA, SCHEMA_VERSION, SENT_SCHEMA, read_schema_version
from .runner import CellReport, run_cell, run_matrix

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
    "load_matrix",
    "parse_matrix",
    "read_schema_version",
    "required_samples",
    "run_cell",
    "run_matrix",
    "summarize",
]
