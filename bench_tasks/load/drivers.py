"""A cell's routes with the spec each route's driver is built from, and the drivers themselves, asked of the
cell's system (the only place the load side reaches the system registry)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping
from typing import Any

from ..spec.background import Background
from .driver import Driver
from .routes import HOP2, MEASURED, background_route


def driver_for(
    address: str, cell: Any, cell_id: str, route: str = MEASURED, client: Mapping[str, Any] | None = None
) -> Driver:
    """The cell's system's driver for one route. `address` is what the brokers' handle gives; `cell_id` names
    the routes (a Target's `names`); `client` adds security settings to every client."""
    from ..systems import system_of

    return system_of(cell).driver(address, cell, cell_id, route, client)


def driver_module(system: Any) -> str | None:
    """The `driver` module of the package that defines the system or the one it is built on (valkey's is redis')."""
    for cls in type(system).__mro__:
        package = sys.modules.get(cls.__module__)
        if hasattr(package, "__path__") and importlib.util.find_spec(f"{cls.__module__}.driver"):
            return f"{cls.__module__}.driver"
    return None


def every_driver_module() -> list[str]:
    """Every system's driver module, once each (systems built on another share its driver)."""
    from ..systems import SYSTEMS

    return list(dict.fromkeys(filter(None, map(driver_module, SYSTEMS.values()))))


def worker_modules(cell: Any) -> list[str]:
    """What the cell's Python workers import: the generator and the cell's system's driver (`cell.workerctx`'s
    fork server imports them once for every worker it forks)."""
    from ..systems import system_of

    return ["bench_tasks.load.generator", *filter(None, [driver_module(system_of(cell))])]


def import_driver(cell: Any) -> None:
    """Import the cell's system's driver and its client library now, ahead of the cell's first route (a held
    generator does it while the brokers start)."""
    from ..systems import system_of

    name = driver_module(system_of(cell))
    if name is not None:
        importlib.import_module(name)


def background_spec(cell: Any, bg: Background) -> Any:
    """The cell as a background route's driver sees it (its system shapes the route from the background's own
    layout and producer settings)."""
    from ..systems import system_of

    return system_of(cell).background_spec(cell, bg)


def routes(cell: Any) -> dict[str, Any]:
    """Every route a cell sends on, with the spec its driver is built from."""
    out = {MEASURED: cell}
    if cell.measurement == "chain":
        out[HOP2] = cell
    for name, bg in cell.background.items():
        if bg.producers:
            out[background_route(name)] = background_spec(cell, bg)
    return out
