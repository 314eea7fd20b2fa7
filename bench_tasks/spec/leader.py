"""Leader placement a matrix asks for: `broker.leader: node:N`, the node that leads the cell's measured route.

Seed 001 found one broker much worse whenever it led, and re-created topics until the leader landed where its
authors wanted; `broker.leader` makes that a setting (and an axis). Whether a system can place a leader, with
which broker settings, and which node ids its cell has are asked of the system (`LeaderSupport`, set by its
`System`), so the spec names no system. Unset, the leader is wherever the system puts it, and the cell's spec
(and id) is what it was before the key existed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from pydantic import Field

LEADER_PATTERN = r"^node:(\d+)$"
_LEADER = re.compile(LEADER_PATTERN)


def _cannot(broker: Any) -> str | None:
    return "cannot place a leader"


@dataclass(frozen=True)
class LeaderSupport:
    """Whether a system can place its measured route's leader. `refusal(broker)`: why not with these broker
    settings (None: it can)."""

    system: str = "this system"
    refusal: Callable[[Any], str | None] = _cannot


def leader_field() -> Any:
    """The `leader` field of a broker model whose system can place a leader (Kafka, NATS)."""
    return Field(
        None,
        pattern=LEADER_PATTERN,
        description="node:N: the node that leads the measured route (docs/matrix.md, Leader placement); unset: "
        "wherever the system puts it",
    )


def refuse_unplaceable(broker: Any, support: LeaderSupport) -> None:
    """Raise when raw broker settings ask a system that cannot place a leader for one (its model has no field)."""
    if isinstance(broker, dict) and "leader" in broker:
        raise ValueError(f"broker.leader: {broker['leader']!r} — {support.system} cannot place a leader; leave it out")


def leader_node(leader: str | None) -> int | None:
    """N of `node:N`; None when no leader is asked for."""
    found = _LEADER.match(leader or "")
    return int(found.group(1)) if found else None


def check_leader(
    leader: str | None, broker: Any, external: bool, support: LeaderSupport, nodes: Collection[int] | None
) -> list[str]:
    """Every problem of a cell's `broker.leader`, each naming the field: a system (or broker settings) that
    cannot place a leader, external brokers (whose node ids the matrix cannot know), a node the cell has not."""
    node = leader_node(leader)
    if node is None:
        return []
    where = f"broker.leader: {leader!r} — "
    refusal = support.refusal(broker)
    if refusal is not None:
        return [where + f"{support.system} {refusal}; leave broker.leader out"]
    if external:
        return [where + "external brokers are not placed by the cell; only provisioned brokers take a leader"]
    if nodes is not None and node not in nodes:
        return [where + "this cell's nodes are " + ", ".join(f"node:{n}" for n in sorted(nodes))]
    return []
