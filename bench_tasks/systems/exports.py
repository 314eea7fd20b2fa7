"""A system package's public API: what its `__init__` names in `__all__` is what tools outside the core (the
benchmarks in bench/, tests) may import from it; its other modules are private, as `bench_tasks`' own are.

The registry (`bench_tasks.systems`) imports every system package whenever anything names a system, Airflow's DAG
parsing included, so a package's `__init__` stays light. Names whose modules load a broker client (pika, redis-py,
confluent-kafka, nats-py), numpy or a cluster's machinery are listed in the package's `_LAZY` instead and loaded on
first use (PEP 562) by `lazy_attribute`, as `bench_tasks/__init__.py` does for the core's names.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any


def lazy_attribute(package: str, lazy: Mapping[str, str], name: str) -> Any:
    """`name` from the module of `package` that `lazy` says defines it, imported now and kept on the package so
    later lookups find it at once; AttributeError, as for any missing attribute, when `lazy` does not name it."""
    try:
        module = lazy[name]
    except KeyError:
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", package), name)
    setattr(sys.modules[package], name, value)
    return value
