"""Cells measured on brokers the caller holds: several cells, one broker.

A tool that puts sixnines beside another load generator on the very same broker (bench/native_compare.py: the
native tool, then a cell, in turn), or climbs a rate ladder on one broker, starts the brokers once with
`held_brokers` and measures each cell on them with `run_on_brokers`, through the drive and land steps every run
takes, so each cell is analysed, gated and landed in the lake like any other.

What `run_cell` adds around those steps is the caller's here: no host lease is taken (the tool holding the brokers
holds the host for as long as it runs) and no work folder is kept; the brokers stop when the `with` block ends.
A run of a matrix (`run_cell`, `run_matrix`, Airflow's tasks) never comes this way: its cells start fresh brokers.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from ..brokers.handles import BrokerHandle
from ..lake.layout import Lake, RunInfo
from ..spec.matrix_model import Cell
from ..topology.plan import resolve_placement
from .drive import drive
from .landing import CellReport, land_cell
from .lifecycle import provision_brokers


@contextlib.contextmanager
def held_brokers(cell: Cell, workdir: Path) -> Iterator[BrokerHandle]:
    """The brokers `cell` needs, started in `workdir` (placed as the cell says), stopped when the block ends,
    however it ends. Every cell run on them must want the same brokers: the same system, release and broker
    settings."""
    brokers = provision_brokers(cell, resolve_placement(cell), workdir)
    try:
        yield brokers
    finally:
        brokers.stop()


def run_on_brokers(cell: Cell, brokers: BrokerHandle, lake: Lake, console: Console) -> CellReport:
    """One cell on running `brokers`, landed in `lake` as a run of its own: driven, analysed, gated and committed
    like every cell. A failed cell is a report that says why, never an exception."""
    run = RunInfo.new()
    started = dt.datetime.now(dt.UTC).isoformat()
    staging = lake.staging_dir(run, cell.instance)
    driven = drive(cell, resolve_placement(cell), brokers.target(), staging, brokers, console)
    return land_cell(cell, lake, run, staging, driven.run, brokers.context(), driven.status, driven.reason, started)
