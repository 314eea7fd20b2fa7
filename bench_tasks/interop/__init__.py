"""Interop with the tools performance engineers already use (issue 21).

In: OpenMessaging Benchmark workload and driver files → a sixnines matrix (omb_workload, omb_draft; each
system's driver files are its package's `omb.py`, behind omb_driver's interface).
Out: a run as OMB TestResult JSON (omb_result), as HdrHistogram `.hgrm` distributions (hgrm) and its tables
as CSV/Parquet (table_files); export writes them (the only module here that does I/O).
docs/interop.md describes the formats and the field mapping.
"""

from .omb_workload import Imported, ImportOptions, import_omb, matrix_yaml

__all__ = ["ImportOptions", "Imported", "import_omb", "matrix_yaml"]
