"""One generator per real host with the lake on S3 (moto): the hosts meet through objects under
`.hosts/…`, leave their parts there, and land commits one cell from them; nothing of the rendezvous stays."""

from __future__ import annotations

import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo, committed_cells
from bench_tasks.lake.storage import S3Path
from tests.integration.test_real_hosts import real_hosts_cell
from tests.s3.conftest import keys

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_orphans")]


def test_hosts_meet_through_s3(s3_lake: S3Path, s3_client, console: Console) -> None:
    cell = real_hosts_cell({"producers": ["a", "b"], "consumers": ["b", "a"]})
    lake, run = Lake(s3_lake), RunInfo.new()
    report = run_cell(cell, lake, run, console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.received == 500 and acc.lost == 0
    stored = keys(s3_client, s3_lake)
    assert not [k for k in stored if k.startswith(".hosts/")]  # the rendezvous is removed once landed
    (committed,) = committed_cells(lake.run_dir(run))
    names = {p.name for p in committed.folder.iterdir()}
    assert {"sent-p0.parquet", "sent-p1.parquet", "received-c0.parquet", "received-c1.parquet"} <= names
