"""What a forked worker finds imported: the generator and every system's driver with its client library.

The fork server imports this one module (`cell.workerctx`), so the process that starts the server need not load
the systems' registry first. A driver that fails to import is skipped; a worker that needs it imports it itself
and fails there with the real error.
"""

from __future__ import annotations

import importlib

from ..systems import SYSTEMS
from . import generator  # noqa: F401  (imported for the fork server's children)
from .drivers import driver_module


def _import_drivers() -> list[str]:
    loaded = []
    for name in dict.fromkeys(filter(None, map(driver_module, SYSTEMS.values()))):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        loaded.append(name)
    return loaded


DRIVERS = _import_drivers()
