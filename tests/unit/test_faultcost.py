"""What a fault cost, from a cell's samples: recovery time, arrival gap, loss charged by intended send time,
leader before and after from the leader timeline."""

from __future__ import annotations

import pyarrow as pa

from bench_tasks.core.faultcost import fault_costs
from bench_tasks.lake.records import RECEIVED_SCHEMA, SENT_SCHEMA

S = 1_000_000_000
MS = 1_000_000


def tables(arrivals: dict[int, int | None], acked: set[int]) -> tuple[pa.Table, pa.Table]:
    """One message every 100 ms from t=0 to 4 s; `arrivals`: intended ms -> received ms (None: lost)."""
    sent, received = [], []
    for seq, at in enumerate(range(0, 4000, 100)):
        sent.append(
            {"producer_id": 0, "seq": seq, "intended_ns": at * MS, "sent_ns": at * MS, "phase": "measure"}
            | {"acked_ns": at * MS + MS if at in acked else None}
        )
        got = arrivals.get(at, at + 1)
        if got is not None:
            received.append(
                {"consumer_id": 0, "producer_id": 0, "seq": seq, "intended_ns": at * MS, "sent_ns": at * MS}
                | {"received_ns": got * MS, "phase": "measure"}
            )
    return pa.Table.from_pylist(sent, SENT_SCHEMA), pa.Table.from_pylist(received, RECEIVED_SCHEMA)


def test_a_stall_delays_arrivals_and_a_kill_loses_acknowledged_messages() -> None:
    # A stall 1.0-2.0 s: what was meant for then arrives at 2.0 s. A kill at 3.0 s: nothing meant after arrives.
    late = {at: 2000 for at in range(1000, 2000, 100)}
    lost = dict.fromkeys(range(3000, 4000, 100))
    sent, received = tables(late | lost, acked={3000, 3100})
    faults = [
        {"kind": "stall", "start_ns": 1 * S, "end_ns": 2 * S, "node": 2},
        {"kind": "kill", "start_ns": 3 * S, "end_ns": 3 * S, "node": 3},
    ]
    changes = [{"at_ns": 0, "partition": 0, "leader": 2}, {"at_ns": int(3.5 * S), "partition": 0, "leader": 1}]
    stall, kill = fault_costs(faults, sent, received, "e2e", (0, 4 * S), changes)

    assert (stall["fired_s"], stall["ended_s"], stall["window_end_s"]) == (1.0, 2.0, 3.0)
    assert stall["first_arrival_after_s"] == 1.0  # the first message meant after the stall began arrived at 2 s
    assert stall["max_arrival_gap_s"] == 1.0
    assert (stall["lost"], stall["scheduled"], stall["node"]) == (0, 20, 2)
    assert (stall["leader_before"], stall["leader_after"]) == (2, 2)

    assert kill["first_arrival_after_s"] is None and kill["max_arrival_gap_s"] == 1.0
    assert (kill["lost"], kill["acknowledged_but_lost"], kill["scheduled"]) == (10, 2, 10)
    assert (kill["leader_before"], kill["leader_after"]) == (2, 1)


def test_publish_cells_count_acknowledgements_as_arrivals() -> None:
    sent, _ = tables({}, acked={at for at in range(0, 4000, 100) if not 1000 <= at < 1500})
    (fault,) = fault_costs(
        [{"kind": "stall", "start_ns": 1 * S, "end_ns": int(1.5 * S)}], sent, sent, "publish", (0, 4 * S)
    )
    assert fault["lost"] == 5 and fault["first_arrival_after_s"] == 0.501
    assert fault["leader_before"] is None  # no leader timeline: not known


def test_the_report_shows_each_fault_s_cost_and_marks_the_node_hit() -> None:
    from bench_tasks.report.cell_view import fault_costs_records, markers
    from bench_tasks.report.data import CellData

    record = {"kind": "stall", "start_ns": 3 * S, "end_ns": 4 * S, "node": 2, "target": "leader"}
    record |= {"fired_s": 1.0, "ended_s": 2.0, "first_arrival_after_s": 1.01, "lost": 0, "acknowledged_but_lost": 0}
    old = {"kind": "kill", "start_ns": 5 * S, "end_ns": 5 * S}  # landed before faults had costs
    cell = CellData(None, None, {"faults": [record, old], "phases": {"t0_ns": 0}}, None)  # type: ignore[arg-type]
    (row,) = fault_costs_records(cell)
    assert (row["action"], row["node"], row["first arrival after (s)"], row["acked but lost"]) == ("stall", 2, 1.01, 0)
    assert [m.label for m in markers(cell)] == ["stall node 2 1.00 s", "kill 0.00 s"]
