"""Every name of the public API (`bench_tasks.__init__`'s lazy exports) resolves: a module split must move the
export with the name, or every DAG and plugin that imports it breaks at task time, not at parse time."""

from __future__ import annotations

import pytest

import bench_tasks


@pytest.mark.parametrize("name", sorted(bench_tasks._EXPORTS))
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(bench_tasks, name) is not None
