"""What a forked worker finds imported: the generator and every system's driver with its client library.

The fork server imports this one module (`cell.workerctx`), so the process that starts the server need not load
the systems' registry first. A driver that fails to import is skipped; a worker that needs it imports it itself
and fails there with the real error.
"""

from __future__ import annotations

import importlib

from . import generator  # noqa: F401  (imported for the fork server's children)
from .drivers import every_driver_module


def _import_drivers() -> list[str]:
    loaded = []
    for name in every_driver_module():
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        loaded.append(name)
    return loaded


DRIVERS = _import_drivers()
