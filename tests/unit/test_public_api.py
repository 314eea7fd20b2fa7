"""Every name of the public API (`bench_tasks.__init__`'s lazy exports, and each system package's `__all__`)
resolves: a module split must move the export with the name, or every DAG, plugin and benchmark that imports it
breaks at task time, not at parse time."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import bench_tasks

SYSTEMS_DIR = Path(bench_tasks.__file__).parent / "systems"
SYSTEM_PACKAGES = sorted(f"bench_tasks.systems.{p.parent.name}" for p in SYSTEMS_DIR.glob("*/__init__.py"))


@pytest.mark.parametrize("name", sorted(bench_tasks._EXPORTS))
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(bench_tasks, name) is not None


def _system_exports() -> list[tuple[str, str]]:
    return [(package, name) for package in SYSTEM_PACKAGES for name in importlib.import_module(package).__all__]


@pytest.mark.parametrize(("package", "name"), _system_exports())
def test_every_public_name_of_a_system_resolves(package: str, name: str) -> None:
    """What a system package's `__all__` names (loaded lazily or not) is there."""
    assert getattr(importlib.import_module(package), name) is not None


def test_a_system_package_loads_no_client_until_asked() -> None:
    """The registry imports every system package whenever a system is named (DAG parsing too): their public
    names that need a broker client, numpy or protobuf load on first use only (bench_tasks/systems/exports.py)."""
    probe = "import sys; import bench_tasks.systems; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    repo = Path(bench_tasks.__file__).parents[1]
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=repo)
    heavy = {"numpy", "pyarrow", "pika", "redis", "confluent_kafka", "nats", "google", "psutil"}
    assert not heavy & set(done.stdout.split())


def test_an_unknown_name_of_a_system_is_an_attribute_error() -> None:
    kafka = importlib.import_module("bench_tasks.systems.kafka")
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        kafka.nothing_here  # noqa: B018
