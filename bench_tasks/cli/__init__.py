"""`sixnines` (and `python -m bench_tasks`): run matrices, list runs, build tables and reports, manage brokers.

Each module holds one command group; importing them registers their commands on `app`.
"""

from . import run, capacity, results, interop, lake, brokers, cell  # noqa: F401, I001 (registers the commands, in the order help lists them)
from .app import app, main

__all__ = ["app", "main"]
