"""Whether a run's raw samples were pruned, and the refusal of every step that needs them.

`sixnines lake prune` (bench_tasks.lake.prune) removes a run's raw sample files (`sent-p*`, `received-c*`,
`relayed-r*`) and records it in `runs/run_date=D/run_id=R/raw_pruned.json`, beside the cells table, which
stays. The marker is written *before* the first file goes (state `pruning`) and rewritten as `pruned` after
the last, so a run never claims raw files it may lack: a reader that finds the marker in either state treats
the samples as gone. Steps that read samples (re-analysis, OMB and `.hgrm` export) refuse such a run with
`RawSamplesPruned`, naming the run and when; the report takes each cell's numbers from what landing recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import SixninesError
from .storage import LakePath, lake_path

MARKER_NAME = "raw_pruned.json"
MARKER_VERSION = (
    1  # {"schema_version", "state", "started_at", "pruned_at", "older_than_days", "cells", "files", "bytes"}
)
STATE_PRUNING, STATE_PRUNED = "pruning", "pruned"
# The raw sample files of a landed cell; cell.hlog, result.json and the logs stay.
RAW_SAMPLE_PATTERNS = ("sent-p*.parquet", "received-c*.parquet", "relayed-r*.parquet")


class RawSamplesPruned(SixninesError):
    """A step needs a run's raw samples and `sixnines lake prune` removed them (exit 2: the input cannot serve)."""

    exit_code = 2

    def __init__(self, run_id: str, marker: dict[str, Any], needed_for: str):
        when = marker.get("pruned_at") or marker.get("started_at") or "at an unknown time"
        super().__init__(
            f"run {run_id}: its raw samples were pruned ({when}, sixnines lake prune), so {needed_for} is not "
            "possible; its tables, histograms (cell.hlog), cells rows, history and report remain"
        )
        self.run_id = run_id
        self.marker = marker


def marker_path(lake_root: str | Path | LakePath, run_date: str, run_id: str) -> LakePath:
    """Where a run's prune record is: beside its cells table (`runs/…`), which pruning never touches."""
    return lake_path(lake_root) / "runs" / f"run_date={run_date}" / f"run_id={run_id}" / MARKER_NAME


def pruned_marker(lake_root: str | Path | LakePath, run_date: str, run_id: str) -> dict[str, Any] | None:
    """The run's prune record (a `pruning` one too: some files may be gone), or None when its raw samples are
    whole."""
    try:
        return json.loads(marker_path(lake_root, run_date, run_id).read_text())
    except FileNotFoundError:
        return None


def refuse_if_pruned(lake_root: str | Path | LakePath, run_date: str, run_id: str, needed_for: str) -> None:
    """Raise RawSamplesPruned when the run's raw samples were pruned; `needed_for` names the step."""
    marker = pruned_marker(lake_root, run_date, run_id)
    if marker is not None:
        raise RawSamplesPruned(run_id, marker, needed_for)
