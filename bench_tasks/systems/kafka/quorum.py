"""Which node is the active KRaft controller, from the quorum state the nodes write to their own data folders.

Every node records the metadata quorum's leader as it learns it, in `<log.dirs>/__cluster_metadata-0/quorum-state`
(JSON: `leaderId` at `leaderEpoch`). Reading those files asks nothing of a broker that may be frozen or dead, and
the newest epoch any node has seen names the controller (a node that missed an election still holds an older
epoch). Kafka's DescribeCluster cannot answer this: under KRaft it reports a random broker as the controller."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

QUORUM_STATE = Path("__cluster_metadata-0") / "quorum-state"


def quorum_state_file(log_dir: str | Path) -> Path:
    """Where a node whose `log.dirs` is `log_dir` keeps its view of the metadata quorum."""
    return Path(log_dir) / QUORUM_STATE


def active_controller(files: Iterable[Path]) -> int | None:
    """The `leaderId` of the newest epoch among the nodes' quorum-state files; None while no node knows one (an
    election, or files not written yet)."""
    newest: tuple[int, int] | None = None
    for path in files:
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # not written yet, or caught mid-rewrite: the other nodes answer
        leader, epoch = int(state.get("leaderId", -1)), int(state.get("leaderEpoch", -1))
        if leader >= 0 and (newest is None or epoch > newest[0]):
            newest = (epoch, leader)
    return None if newest is None else newest[1]
