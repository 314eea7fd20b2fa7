"""What a fault cost, from a cell's samples: recovery time, arrival gap, loss charged by intended send time,
leader before and after from the leader timeline."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench_tasks.core.faultcost import fault_costs
from bench_tasks.lake.records import RECEIVED_SCHEMA, SENT_SCHEMA

S = 1_000_000_000
MS = 1_000_000
US = 1_000


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
    record |= {"p99_recovery_s": 1.3, "duplicated": 2}
    old = {"kind": "kill", "start_ns": 5 * S, "end_ns": 5 * S}  # landed before faults had costs
    cell = CellData(None, None, {"faults": [record, old], "phases": {"t0_ns": 0}}, None)  # type: ignore[arg-type]
    (row,) = fault_costs_records(cell)
    assert (row["action"], row["node"], row["first arrival after (s)"], row["acked but lost"]) == ("stall", 2, 1.01, 0)
    assert (row["p99 back after (s)"], row["duplicated"]) == (1.3, 2)
    assert [m.label for m in markers(cell)] == ["stall node 2 1.00 s", "kill 0.00 s"]


def dense(arrive: Callable[[int], int | None], until_ms: int = 8000) -> tuple[pa.Table, pa.Table]:
    """200 messages a second from t=0 to `until_ms`, each acknowledged when sent; `arrive(intended µs)` gives its
    receipt time in µs (None: lost)."""
    sent, received = [], []
    for seq, at in enumerate(range(0, until_ms * 1000, 5000)):
        sent.append(
            {"producer_id": 0, "seq": seq, "intended_ns": at * US, "sent_ns": at * US, "acked_ns": at * US + US}
            | {"phase": "measure"}
        )
        got = arrive(at)
        if got is not None:
            received.append(
                {"consumer_id": 0, "producer_id": 0, "seq": seq, "intended_ns": at * US, "sent_ns": at * US}
                | {"received_ns": got * US, "phase": "measure"}
            )
    return pa.Table.from_pylist(sent, SENT_SCHEMA), pa.Table.from_pylist(received, RECEIVED_SCHEMA)


def test_p99_recovery_is_when_the_rolling_p99_came_back_and_stayed() -> None:
    # 1 ms before the faults; a stall 2-3 s holds what was meant then until 3 s; then 1.1 ms (within 20 %).
    def arrive(at: int) -> int:
        if at < 2_000_000:
            return at + 1000
        return max(at, 3_000_000) + 1100 if at < 3_000_000 else at + 1100

    sent, received = dense(arrive)
    (stall,) = fault_costs([{"kind": "stall", "start_ns": 2 * S, "end_ns": 3 * S}], sent, received, "e2e", (0, 8 * S))
    assert stall["p99_baseline_ms"] == 1.0
    assert stall["p99_recovery_s"] == 1.0  # the first window free of the backlog starts when the stall ended


def test_p99_recovery_allows_the_noise_the_route_had_before_the_faults() -> None:
    # 1 ms, but four messages at 3 ms around 0.5 s and again around 4.5 s: the windows holding them have a p99 of
    # 3 ms before the stall (2-3 s) as after it, so the route is back when the stall's backlog is gone
    def arrive(at: int) -> int:
        if 2_000_000 <= at < 3_000_000:
            return 3_000_000 + 1000
        noisy = 500_000 <= at < 520_000 or 4_500_000 <= at < 4_520_000
        return at + (3000 if noisy else 1000)

    sent, received = dense(arrive)
    (stall,) = fault_costs([{"kind": "stall", "start_ns": 2 * S, "end_ns": 3 * S}], sent, received, "e2e", (0, 8 * S))
    assert stall["p99_baseline_ms"] == 1.0 and stall["p99_band_ms"] == 3.0
    assert stall["p99_recovery_s"] == 1.0


def test_p99_recovery_allows_what_a_window_of_the_baseline_reaches_by_chance() -> None:
    # 1 ms, with one message a second at 3 ms before the stall: no window's p99 (its 3rd highest of 200) is 3 ms,
    # yet after it three a second put every window's p99 at 3 ms. A window of 200 drawn from the baseline reaches
    # that by chance (its quantile 0.99 + 3 standard errors is past the maximum), so the band is 3 ms.
    def arrive(at: int) -> int:
        if 2_000_000 <= at < 3_000_000:
            return 3_000_000 + 1000
        every = 1_000_000 if at < 2_000_000 else 333_000
        return at + (3000 if at % every < 5000 else 1000)

    sent, received = dense(arrive)
    (stall,) = fault_costs([{"kind": "stall", "start_ns": 2 * S, "end_ns": 3 * S}], sent, received, "e2e", (0, 8 * S))
    assert stall["p99_baseline_ms"] == 1.0 and stall["p99_band_ms"] == 3.0
    assert stall["p99_recovery_s"] == 1.0


def test_p99_never_recovers_from_a_kill_or_from_a_slower_route() -> None:
    sent, received = dense(lambda at: at + 1000 if at < 2_000_000 else None)
    (kill,) = fault_costs([{"kind": "kill", "start_ns": 2 * S, "end_ns": 2 * S}], sent, received, "e2e", (0, 8 * S))
    assert kill["p99_recovery_s"] is None and kill["lost"] == 1200

    # after the fault the route answers in 1.3 ms against 1.0 ms before: beyond 20 %, never recovered
    sent, received = dense(lambda at: at + (1000 if at < 2_000_000 else 1300))
    (slower,) = fault_costs([{"kind": "stall", "start_ns": 2 * S, "end_ns": 2 * S}], sent, received, "e2e", (0, 8 * S))
    assert slower["p99_recovery_s"] is None


def test_p99_recovery_needs_one_window_more_within_the_measure_phase() -> None:
    # a 1 s stall 5.5-6.5 s: the first good window starts at 6.5 s, but its stay (to 8.5 s) outlasts the phase
    sent, received = dense(lambda at: max(at, 6_500_000) + 1000 if 5_500_000 <= at < 6_500_000 else at + 1000)
    (late,) = fault_costs(
        [{"kind": "stall", "start_ns": int(5.5 * S), "end_ns": int(6.5 * S)}], sent, received, "e2e", (0, 8 * S)
    )
    assert late["p99_recovery_s"] is None
    sent, received = dense(
        lambda at: max(at, 6_500_000) + 1000 if 5_500_000 <= at < 6_500_000 else at + 1000, until_ms=9000
    )
    (room,) = fault_costs(
        [{"kind": "stall", "start_ns": int(5.5 * S), "end_ns": int(6.5 * S)}], sent, received, "e2e", (0, 9 * S)
    )
    assert room["p99_recovery_s"] == 1.0


def test_duplicates_are_charged_to_the_fault_whose_window_meant_the_message() -> None:
    sent, received = tables({}, acked=set())
    again = received.filter(pc.is_in(received["seq"], pa.array([5, 25, 26], pa.int64())))  # meant 0.5, 2.5, 2.6 s
    faults = [{"kind": "stall", "start_ns": 0, "end_ns": S}, {"kind": "kill", "start_ns": 2 * S, "end_ns": 2 * S}]
    first, second = fault_costs(faults, sent, pa.concat_tables([received, again]), "e2e", (0, 4 * S))
    assert (first["duplicated"], second["duplicated"]) == (1, 2)
    assert first["p99_baseline_ms"] is None and first["p99_recovery_s"] is None  # nothing meant before the first


def test_the_window_p99_is_the_inverted_cdf_sample() -> None:
    from bench_tasks.core.percentiles import summarize
    from bench_tasks.core.recovery import p99

    rng = np.random.default_rng(7)
    for n in (1, 99, 100, 101, 200, 1234):
        values = rng.integers(0, 10**9, n)
        assert p99(values) == (summarize(values).percentiles["99"] or values.max())
    assert p99(np.array([], dtype=np.int64)) is None
