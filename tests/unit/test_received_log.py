"""The generator's receive path without a broker: batches stamped on hand-over, headers decoded into columns."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bench_tasks.core.schedule import PhasePlan
from bench_tasks.load import receivedlog
from bench_tasks.load.payload import PayloadFactory, relay, stamp_relay_sent
from bench_tasks.load.plan import Clock
from bench_tasks.load.receivedlog import ReceivedLog
from bench_tasks.load.sentlog import SentLog


class Batch:
    def __init__(self, payloads: list[bytes], partitions: list[int] | None = None, offsets: list[int] | None = None):
        self._payloads, self._partitions, self._offsets = payloads, partitions, offsets

    def payloads(self) -> list[bytes]:
        return self._payloads

    def partitions(self) -> list[int] | None:
        return self._partitions

    def offsets(self) -> list[int] | None:
        return self._offsets


class TinyBlocks(ReceivedLog):
    BLOCK = 2


@pytest.fixture
def clock() -> Clock:
    """A worker's clock that advances 1 µs on every read, from 1 ms."""
    ticks = itertools.count(1_000_000, 1000)
    return lambda: next(ticks)


def test_a_batch_is_stamped_once_and_decoded_into_columns(clock: Clock) -> None:
    factory = PayloadFactory(64)
    log = TinyBlocks(clock)  # rows span blocks, and blocks are added
    log.on_messages(Batch([factory.make(0, s, 10 * s, 10 * s + 1) for s in range(3)], [2, 2, 2], [7, 8, 9]))
    log.on_messages(Batch([factory.make(1, 0, 5, 6), b"not ours"]))
    assert log.count == 0 and log.handed == 5  # gathered, not decoded yet
    log.flush()
    c = log.columns()
    assert log.count == 4 and log.bad == 1
    assert c["pid"].tolist() == [0, 0, 0, 1]
    assert c["seq"].tolist() == [0, 1, 2, 0]
    assert c["intended"].tolist() == [0, 10, 20, 5]
    assert c["received"].tolist() == [1_000_000] * 3 + [1_001_000]  # one stamp per hand-over
    assert c["partition"].tolist() == [2, 2, 2, -1] and c["offset"].tolist() == [7, 8, 9, -1]
    assert c["hop"].tolist() == [0] * 4 and c["relay_received"].tolist() == [-1] * 4


def test_relayed_messages_keep_the_relay_stamps(clock: Clock) -> None:
    message = stamp_relay_sent(relay(PayloadFactory(64).make(3, 4, 100, 110), received_ns=150), 160)
    log = ReceivedLog(clock)
    log.on_messages(Batch([message]))
    log.flush()
    c = log.columns()
    assert (c["hop"][0], c["relay_received"][0], c["relay_sent"][0]) == (2, 150, 160)


def test_gathered_payloads_are_decoded_after_a_while_or_in_bulk(clock: Clock) -> None:
    factory = PayloadFactory(40)
    log = ReceivedLog(clock)
    log.on_messages(Batch([factory.make(0, 0, 0, 0)]))
    for _ in range(receivedlog._FLUSH_AFTER_NS // 1000):  # each call advances the clock by 1 µs
        clock()
    log.on_messages(Batch([factory.make(0, 1, 0, 0)]))
    assert log.count == 2


def test_the_table_tags_phases_by_intended_time(clock: Clock) -> None:
    factory = PayloadFactory(40)
    log = ReceivedLog(clock)
    log.on_messages(Batch([factory.make(0, s, t, t) for s, t in enumerate((5, 15, 25))]))
    log.flush()
    table = log.table(0, PhasePlan(0, 10, 10, 10))
    assert table["phase"].to_pylist() == ["warmup", "measure", "cooldown"]
    assert table["offset"].null_count == 3


def test_sent_log_records_stamps_as_pulled_and_forgets_refused(clock: Clock) -> None:
    log = SentLog(np.array([10, 20, 30], dtype=np.int64), clock)
    messages = PayloadFactory(40).batch(0, range(3), [10, 20, 30], clock)
    pulled = [seq for seq, _stream, _message in log.stamped(messages, stream=5)]
    log.refused({1: "BufferError"})
    assert pulled == [0, 1, 2]
    assert log.sent.tolist() == [1_000_000, -1, 1_002_000]
    assert log.errors == {1: "BufferError"}


def test_receipts_are_stamped_at_arrival_and_the_wait_is_kept(clock: Clock) -> None:
    factory = PayloadFactory(40)
    log = ReceivedLog(clock)
    log.arrivals.mark()  # bytes reached the process at 1_000_000
    clock()  # parsing took a while
    log.on_messages(Batch([factory.make(0, s, 0, 0) for s in range(3)]))  # handed over at 1_002_000
    log.flush()
    c = log.columns()
    assert c["received"].tolist() == [1_000_000] * 3
    assert c["handed"].tolist() == [1_002_000] * 3
    assert log.waits_us((0, 1)) == {"50": 2.0, "99": 2.0, "99.9": 2.0, "max": 2.0, "count": 3}
    assert log.waits_us((5, 6)) is None  # nothing intended then


def test_storage_for_the_expected_receipts_is_there_before_the_schedule(clock: Clock) -> None:
    log = TinyBlocks(clock, expected=5)
    assert len(log.blocks) == 3 and (log.blocks[2] == -1).all()
    log.append(np.arange(len(receivedlog.RECEIVED_FIELDS) * 7).reshape(-1, 7))
    assert len(log.blocks) == 4 and log.count == 7
    assert log.columns(3, 6)["pid"].tolist() == [3, 4, 5]
    assert log.columns(6, 6)["pid"].tolist() == []


def test_the_file_is_written_a_slice_at_a_time_and_holds_every_row(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The receiver's file is the table, written in slices (row groups) so writing never doubles the log."""
    import pyarrow.parquet as pq

    from bench_tasks.lake.records import SCHEMA_VERSION, read_schema_version

    monkeypatch.setattr(receivedlog, "WRITE_ROWS", 3)
    factory = PayloadFactory(40)
    log = TinyBlocks(clock)
    log.on_messages(Batch([factory.make(0, s, 3 * s, 3 * s) for s in range(8)], [1] * 8, list(range(8))))
    log.flush()
    plan = PhasePlan(0, 6, 12, 6)
    log.write(2, plan, tmp_path / "received-c2.parquet")
    written = pq.ParquetFile(tmp_path / "received-c2.parquet")
    assert written.metadata.num_row_groups == 3  # 3 + 3 + 2 rows
    assert written.read().equals(log.table(2, plan))
    assert read_schema_version(tmp_path / "received-c2.parquet") == SCHEMA_VERSION
    ReceivedLog(clock).write(0, plan, tmp_path / "none.parquet")  # nothing received: an empty file of the schema
    assert pq.read_table(tmp_path / "none.parquet").num_rows == 0


def test_progress_counts_the_gathered_tail_as_received(clock: Clock) -> None:
    """The drain waits until every sent message is received: the last few of a schedule, handed over but not
    decoded yet (too few to flush), must count, or every cell waits out its whole drain timeout."""
    factory = PayloadFactory(64)
    log = ReceivedLog(clock)
    log.on_messages(Batch([factory.make(0, s, 10 * s, 10 * s + 1) for s in range(3)]))
    events: list[dict] = []
    channels = SimpleNamespace(events=SimpleNamespace(put=events.append))
    receivedlog.consumer_progress(SimpleNamespace(index=0), channels, log)
    assert log.count == 0 and events[-1]["received"] == 3  # counted, though not decoded
    assert len(events[-1]["e2e_intended_ns"]) == 0  # latencies only from decoded rows
    log.flush()
    receivedlog.consumer_progress(SimpleNamespace(index=0), channels, log)
    assert events[-1]["received"] == 3 and len(events[-1]["e2e_intended_ns"]) == 3
