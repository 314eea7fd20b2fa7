"""What the workers' fork server imports: a generator drives one cell, so provision records that cell's modules
(the generator and its system's driver) and the generator's server imports those alone, before anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_tasks.cell.generator import worker_modules
from bench_tasks.cell.lifecycle import STATE_SCHEMA_VERSION
from bench_tasks.cell.work import CellWork
from bench_tasks.cell.workerctx import PRELOAD
from bench_tasks.load import drivers

from ..integration.helpers import make_cell


@pytest.mark.parametrize(("system", "driver"), [("nats", "nats"), ("valkey", "redis")])
def test_a_cell_s_workers_need_the_generator_and_its_system_s_driver(system: str, driver: str) -> None:
    spec = make_cell("e2e", system=system).spec
    assert drivers.worker_modules(spec) == ["bench_tasks.load.generator", f"bench_tasks.systems.{driver}.driver"]


def test_the_generator_reads_them_from_the_record_and_else_preloads_every_driver(tmp_path: Path) -> None:
    work = CellWork(tmp_path)
    assert worker_modules(tmp_path) == [PRELOAD]  # nothing recorded
    modules = ["bench_tasks.load.generator", "bench_tasks.systems.kafka.driver"]
    work.state.write_text(json.dumps({"schema_version": STATE_SCHEMA_VERSION, "worker_modules": modules}))
    assert worker_modules(tmp_path) == modules
    work.state.write_text(json.dumps({"schema_version": 2}))  # a cell provisioned before they were recorded
    assert worker_modules(tmp_path) == [PRELOAD]
