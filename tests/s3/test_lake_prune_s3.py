"""Raw-sample retention on an S3 lake (moto's server over loopback): the same real runs, prune and checks as on
a local lake (tests/integration/prune_flow.py), every object reached through the lake's storage layer."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from bench_tasks.lake.storage import S3Path
from tests.integration.prune_flow import prune_and_check
from tests.s3.conftest import keys

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.usefixtures("no_orphans")]


@pytest.mark.timeout(900)
def test_a_pruned_s3_run_still_reports_compares_and_alerts(
    s3_lake: S3Path, s3_client, console: Console, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # anything written to a relative local path would show up here
    monkeypatch.delenv("SIXNINES_LAKE", raising=False)
    prune_and_check(s3_lake, console)
    left = [k.rsplit("/", 1)[-1] for k in keys(s3_client, s3_lake, "raw/")]
    assert left and not [name for name in left if name.startswith(("sent-p", "received-c", "relayed-r"))]
    assert "cell.hlog" in left and "result.json" in left
