"""Raw-sample retention on a local lake, with real NATS cells and the real Spark analysis (prune_flow)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from .prune_flow import prune_and_check

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("no_orphans")]


@pytest.mark.timeout(900)
def test_a_pruned_local_run_still_reports_compares_and_alerts(
    tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SIXNINES_LAKE", raising=False)
    prune_and_check(tmp_path / "lake", console)
