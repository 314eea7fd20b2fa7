"""bench_tasks.core.analysis: message accounting and latency series on tiny literal tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from bench_tasks.core.analysis import Accounting, account, analyze, first_receipts, latency_series
from bench_tasks.core.percentile_keys import PERCENTILES
from bench_tasks.lake.records import RECEIVED_SCHEMA, SENT_SCHEMA

MEASURE = (1_000, 2_000)  # measure window [start, end) in ns on the shared clock


def sent_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.table({n: [r.get(n) for r in rows] for n in SENT_SCHEMA.names}, schema=SENT_SCHEMA)


def received_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.table({n: [r.get(n) for r in rows] for n in RECEIVED_SCHEMA.names}, schema=RECEIVED_SCHEMA)


def sent(pid: int, seq: int, intended: int, sent_ns: int | None, phase: str, acked: int | None = None) -> dict:
    row = {"producer_id": pid, "seq": seq, "intended_ns": intended, "sent_ns": sent_ns, "acked_ns": acked}
    return {**row, "phase": phase, "error": None if sent_ns is not None else "refused"}


def received(consumer: int, pid: int, seq: int, intended: int, sent_ns: int, at: int, phase: str) -> dict:
    return {
        "consumer_id": consumer,
        "producer_id": pid,
        "seq": seq,
        "intended_ns": intended,
        "sent_ns": sent_ns,
        "received_ns": at,
        "hop": 0,
        "phase": phase,
    }


# One e2e cell: a warmup and a cooldown message, and in measure:
#   (0,1) sent, acked, received twice (consumer 1 got it first, at 1300)
#   (0,2) sent and acked but never received  -> lost, acknowledged_but_lost
#   (0,3) refused by the client               -> send error
#   (1,1) sent on time, received once
#   (1,2) sent late (lag 60), never received  -> lost
SENT = sent_table(
    [
        sent(0, 0, 100, 105, "warmup"),
        sent(0, 1, 1_000, 1_010, "measure", acked=1_100),
        sent(0, 2, 1_200, 1_230, "measure", acked=1_300),
        sent(0, 3, 1_400, None, "measure"),
        sent(1, 1, 1_500, 1_500, "measure"),
        sent(1, 2, 1_900, 1_960, "measure"),
        sent(0, 4, 2_100, 2_110, "cooldown"),
    ]
)
RECEIVED = received_table(
    [
        received(0, 0, 0, 100, 105, 200, "warmup"),
        received(0, 0, 1, 1_000, 1_010, 1_500, "measure"),
        received(1, 0, 1, 1_000, 1_010, 1_300, "measure"),
        received(0, 1, 1, 1_500, 1_500, 1_600, "measure"),
        received(0, 0, 4, 2_100, 2_110, 2_600, "cooldown"),
    ]
)


def test_literal_tables_match_schemas() -> None:
    assert SENT.schema.equals(SENT_SCHEMA)
    assert RECEIVED.schema.equals(RECEIVED_SCHEMA)


def test_account_all_rows_e2e() -> None:
    assert account(SENT, RECEIVED, "e2e") == Accounting(
        scheduled=7,
        sent=6,
        send_errors=1,
        acknowledged=2,
        received=4,  # (0,0) (0,1) (1,1) (0,4): the duplicate counts once
        duplicated=1,
        lost=2,  # (0,2) and (1,2)
        acknowledged_but_lost=1,  # (0,2)
    )


def test_account_publish_counts_missing_acks_as_lost() -> None:
    # without receipts, a message is lost when it was sent but never acknowledged
    assert account(SENT, None, "publish") == Accounting(
        scheduled=7,
        sent=6,
        send_errors=1,
        acknowledged=2,
        received=0,
        duplicated=0,
        lost=4,
        acknowledged_but_lost=0,
    )


def test_account_rtt_ignores_received_table() -> None:
    assert account(SENT, RECEIVED, "rtt") == account(SENT, None, "rtt")


def test_account_empty() -> None:
    empty = account(SENT_SCHEMA.empty_table(), RECEIVED_SCHEMA.empty_table(), "e2e")
    assert empty == Accounting(0, 0, 0, 0, 0, 0, 0, 0)


def test_account_nothing_received() -> None:
    result = account(SENT, RECEIVED_SCHEMA.empty_table(), "e2e")
    assert (result.received, result.lost, result.acknowledged_but_lost) == (0, 6, 2)


def test_account_matches_on_producer_and_seq() -> None:
    # same seq from another producer is a different message
    s = sent_table([sent(0, 5, 1_000, 1_001, "measure"), sent(1, 5, 1_000, 1_002, "measure")])
    r = received_table([received(0, 1, 5, 1_000, 1_002, 1_010, "measure")])
    result = account(s, r, "e2e")
    assert (result.received, result.lost) == (1, 1)


def test_first_receipts_keeps_earliest() -> None:
    unique, duplicated = first_receipts(RECEIVED)
    assert duplicated == 1
    assert unique.num_rows == 4
    rows = {(r["producer_id"], r["seq"]): r for r in unique.to_pylist()}
    assert rows[(0, 1)]["received_ns"] == 1_300
    assert rows[(0, 1)]["consumer_id"] == 1


def test_first_receipts_triple_delivery() -> None:
    r = received_table([received(c, 2, 9, 1_000, 1_000, at, "measure") for c, at in ((0, 30), (1, 10), (2, 20))])
    unique, duplicated = first_receipts(r)
    assert duplicated == 2
    assert unique.column("received_ns").to_pylist() == [10]


def test_analyze_measure_phase_accounting() -> None:
    result = analyze(SENT, RECEIVED, "e2e", "publish", MEASURE, 5_000_000.0)
    assert result.accounting == Accounting(
        scheduled=5,
        sent=4,
        send_errors=1,
        acknowledged=2,
        received=2,
        duplicated=1,
        lost=2,
        acknowledged_but_lost=1,
    )
    assert result.accounting_all_phases == account(SENT, RECEIVED, "e2e")
    assert result.accounting_all_phases.scheduled == 7


def test_analyze_e2e_latencies_are_exact() -> None:
    result = analyze(SENT, RECEIVED, "e2e", None, MEASURE, 5_000_000.0)
    assert set(result.metrics) == {"e2e"}
    from_intended = result.metrics["e2e"]["intended"]
    from_sent = result.metrics["e2e"]["sent"]
    # measure-phase first receipts: (0,1) 1300-1000=300 / 1300-1010=290 ; (1,1) 1600-1500=100 / 100
    assert from_intended.count == from_sent.count == 2
    assert (from_intended.min_ns, from_intended.max_ns) == (100, 300)
    assert (from_sent.min_ns, from_sent.max_ns) == (100, 290)
    assert from_intended.mean_ns == pytest.approx(200.0)
    assert from_sent.mean_ns == pytest.approx(195.0)
    assert from_intended.percentiles["50"] == 100
    assert from_intended.percentiles["90"] is None  # 2 samples support p50 only


def test_analyze_acked_metric_latencies() -> None:
    result = analyze(SENT, RECEIVED, "e2e", "publish", MEASURE, 5_000_000.0)
    assert set(result.metrics) == {"e2e", "publish"}
    publish = result.metrics["publish"]
    # acks: (0,1) 1100-1000=100 / 1100-1010=90 ; (0,2) 1300-1200=100 / 1300-1230=70
    assert publish["intended"].count == 2
    assert (publish["intended"].min_ns, publish["intended"].max_ns) == (100, 100)
    assert (publish["sent"].min_ns, publish["sent"].max_ns) == (70, 90)
    assert publish["sent"].percentiles["50"] == 70


def test_analyze_series_cover_all_phases() -> None:
    result = analyze(SENT, RECEIVED, "e2e", "publish", MEASURE, 5_000_000.0)
    e2e = result.series["e2e"]
    order = np.argsort(e2e.at_ns)
    assert e2e.at_ns[order].tolist() == [100, 1_000, 1_500, 2_100]
    assert e2e.from_intended_ns[order].tolist() == [100, 300, 100, 500]
    assert e2e.from_sent_ns[order].tolist() == [95, 290, 100, 490]
    publish = result.series["publish"]
    assert publish.at_ns.tolist() == [1_000, 1_200]
    assert publish.from_intended_ns.tolist() == [100, 100]
    assert publish.from_sent_ns.tolist() == [90, 70]


def test_latency_series_rtt_has_only_the_acked_metric() -> None:
    series = latency_series(SENT, RECEIVED, "rtt", "rtt")
    assert set(series) == {"rtt"}
    assert series["rtt"].from_intended_ns.tolist() == [100, 100]


def test_schedule_lag_is_sent_minus_intended_in_measure() -> None:
    result = analyze(SENT, RECEIVED, "e2e", None, MEASURE, 5_000_000.0)
    # measure rows with a send time: lags 10, 30, 0, 60 (the refused message has none)
    lag = result.lag
    assert lag.count == 4
    assert (lag.min_ns, lag.max_ns) == (0, 60)
    assert lag.mean_ns == pytest.approx(25.0)
    assert lag.percentiles["50"] == 10


def test_achieved_rate() -> None:
    result = analyze(SENT, RECEIVED, "e2e", None, MEASURE, 5_000_000.0)
    # 4 messages actually sent in a 1000 ns window = 4e6 per second
    assert result.achieved_rate_per_s == pytest.approx(4_000_000.0)
    assert result.target_rate_per_s == 5_000_000.0


def test_achieved_rate_realistic_window() -> None:
    rows = [
        sent(0, i, 1_000_000_000 + i * 10_000_000, 1_000_000_000 + i * 10_000_000 + 5, "measure") for i in range(50)
    ]
    result = analyze(sent_table(rows), RECEIVED_SCHEMA.empty_table(), "e2e", None, (10**9, 2 * 10**9), 100.0)
    assert result.achieved_rate_per_s == pytest.approx(50.0)
    assert result.accounting.lost == 50
    assert result.metrics == {}
    assert result.lag.percentiles["50"] == 5


def test_achieved_rate_counts_what_went_out_in_the_window_not_what_was_due() -> None:
    """A generator that fell behind: 100 messages due in a 1 s window went out at half the pace, 50 of them in
    the window and 50 after it. Achieved is 50/s (what the broker was offered then), not the 100/s target."""
    rows = [sent(0, i, 1_000_000_000 + i * 10_000_000, 1_000_000_000 + i * 20_000_000, "measure") for i in range(100)]
    result = analyze(sent_table(rows), RECEIVED_SCHEMA.empty_table(), "e2e", None, (10**9, 2 * 10**9), 100.0)
    assert result.achieved_rate_per_s == pytest.approx(50.0)
    assert result.accounting.sent == 100  # every one due in the window was sent, late


def test_to_dict_shape() -> None:
    d = analyze(SENT, RECEIVED, "e2e", "publish", MEASURE, 5_000_000.0).to_dict()
    assert d["accounting"]["lost"] == 2
    assert d["accounting_all_phases"]["scheduled"] == 7
    assert d["metrics"]["e2e"]["intended"]["max_ns"] == 300
    assert d["generator"]["schedule_lag"]["max_ns"] == 60
    assert d["generator"]["achieved_rate_per_s"] == pytest.approx(4_000_000.0)
    assert d["backlog"] == {"max_messages": 2, "percentiles_messages": dict.fromkeys(PERCENTILES, 2) | {"50": 1}}


def test_the_backlog_is_weighted_by_time_over_the_measure_phase() -> None:
    """In the window [1000, 2000): nothing carried in (105 sent, 200 received), then sends at 1010, 1230, 1500, 1960
    and first receipts at 1300 and 1600 (1500's duplicate is not a second arrival). The backlog is 0 for 10 ns,
    1 for 780 ns and 2 for 210 ns; the two messages never received are still in it at the end."""
    backlog = analyze(SENT, RECEIVED, "e2e", "publish", MEASURE, 5_000_000.0).backlog
    assert backlog is not None
    assert backlog.max_messages == 2
    assert (backlog.percentiles["50"], backlog.percentiles["90"], backlog.percentiles["99.9999"]) == (1, 2, 2)


def test_a_publish_cells_backlog_is_what_awaits_its_acknowledgement() -> None:
    """Acks at 1100 and 1300 against sends at 105 (never acknowledged), 1010, 1230, 1500 and 1960: 1 carried in,
    2 at 1010, 1 at 1100, 2 at 1230, 1 at 1300, then 2 and 3 with the last two sends."""
    backlog = analyze(SENT, RECEIVED, "publish", "publish", MEASURE, 5_000_000.0).backlog
    assert backlog is not None
    assert backlog.max_messages == 3
    assert backlog.percentiles["50"] == 2  # 1 for 10 + 130 + 200 ns, 2 for 90 + 70 + 460 ns, 3 for 40 ns


def test_a_backlog_levels_only_what_was_held_for_some_time() -> None:
    """A send and an arrival at the same instant never make the backlog 2: only the level after both is held."""
    from bench_tasks.core.backlog import summarize_backlog

    summary = summarize_backlog(np.array([0, 500]), np.array([500, 900]), (0, 1000))
    assert summary is not None
    assert summary.max_messages == 1 and summary.percentiles["50"] == 1 and summary.percentiles["99"] == 1
    assert summarize_backlog(np.array([0]), np.array([]), (5, 5)) is None


def test_leaders_at_follows_the_timeline_per_partition() -> None:
    from bench_tasks.core.analysis import leaders_at

    changes = [
        {"at_ns": 100, "partition": 0, "leader": 1},
        {"at_ns": 100, "partition": 1, "leader": 2},
        {"at_ns": 500, "partition": 0, "leader": 3},  # failover of partition 0 only
    ]
    partition = np.array([0, 0, 0, 1, 1, 7])
    at_ns = np.array([50, 499, 500, 100, 900, 600])
    assert leaders_at(partition, at_ns, changes).tolist() == [-1, 1, 3, 2, 2, -1]


def chain_row(consumer: int, seq: int, hop: int, at: int, relay_in: int, relay_out: int | None) -> dict:
    row = received(consumer, 0, seq, 1_000 + seq * 100, 1_010 + seq * 100, at, "measure")
    return {**row, "hop": hop, "relay_received_ns": relay_in, "relay_sent_ns": relay_out}


def test_chain_hops_and_total_from_both_bases() -> None:
    # message 0: intended 1000, sent 1010, relay got it at 1050, forwarded at 1060, final receipt 1100
    # message 1: intended 1100, sent 1110, relay got it at 1200, forwarded at 1230, never arrived at hop 2
    s = sent_table([sent(0, 0, 1_000, 1_010, "measure", acked=1_020), sent(0, 1, 1_100, 1_110, "measure")])
    final = received_table([chain_row(0, 0, 2, 1_100, 1_050, 1_060)])
    relayed = received_table([chain_row(0, 0, 1, 1_050, 1_050, 1_060), chain_row(0, 1, 1, 1_200, 1_200, 1_230)])
    result = analyze(s, final, "chain", "publish", MEASURE, 2.0, relayed)
    m = result.metrics
    assert (m["hop1"]["intended"].max_ns, m["hop1"]["sent"].max_ns) == (50, 40)
    assert (m["hop2"]["intended"].max_ns, m["hop2"]["sent"].max_ns) == (50, 40)
    assert (m["e2e"]["intended"].max_ns, m["e2e"]["sent"].max_ns) == (100, 90)
    acc = result.accounting
    assert (acc.sent, acc.relayed, acc.received, acc.lost) == (2, 2, 1, 1)  # lost on the second hop


def test_relayed_is_only_counted_for_chains() -> None:
    assert account(SENT, RECEIVED, "e2e").relayed is None
